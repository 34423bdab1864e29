"""The SQL fence: fences writes to PostgreSQL or MySQL/MariaDB in the
writer's own transaction, through any DB-API 2.0 driver.

Before its protected writes, a holder calls ``SQLFence.check(cursor,
sequencer)`` in the same transaction. The check raises the lock's marks in
a fence table, or raises StaleSequencer when a newer grant's writer already
came, and the writer rolls back. The fence row stays locked until the
transaction ends, so a newer holder's check waits for an older holder's
commit: the check and the writes are one critical section.

The rules are those of ``Fence`` (docs/DESIGN.md, "Sequencers"), and the
SQL is the Go package ``sequencer/sqlfence``'s, byte for byte
(testdata/sqlfence-statements.json). Standard library only: the caller
brings the driver (psycopg 3, PyMySQL, ...) and its connection.
"""

from __future__ import annotations

import re
from typing import Any

from .fence import SHARED, MalformedSequencer, Sequencer, StaleSequencer

__all__ = ["DEFAULT_TABLE", "POSTGRES", "MYSQL", "SQLFence", "SchemaError"]

POSTGRES = "postgres"
MYSQL = "mysql"
#: The fence table's name unless SQLFence is given another.
DEFAULT_TABLE = "raftlock_fence"

# The slot column's value for the lock itself (not a semaphore slot).
_LOCK_LEVEL = -1

# A table name: an SQL identifier, optionally qualified by a schema (or
# database) name; nothing that could carry more SQL.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?", re.ASCII)

# The SQLSTATEs and MySQL error numbers of a missing table or column, and
# (PostgreSQL) of an ON CONFLICT that no unique key matches.
_SCHEMA_STATES = {"42P01", "42703", "42P10", "42S02", "42S22"}
_SCHEMA_ERRNOS = {1146, 1054}
_PARAMSTYLES = ("format", "pyformat", "qmark", "numeric", "named")
_PLACEHOLDER = re.compile(r"\$([1-9])|\?")


class SchemaError(Exception):
    """The fence table does not exist, or lacks the columns or the primary
    key (lock_name, slot) of ``SQLFence.schema()``."""


class SQLFence:
    """Checks sequencers against one fence table of one database.

    ``dialect`` is ``"postgres"`` or ``"mysql"`` (MySQL or MariaDB with
    InnoDB); ``table`` an SQL identifier, optionally ``schema.table``;
    ``paramstyle`` the driver's placeholder style (DB-API ``paramstyle``:
    ``"format"``, the default, suits psycopg 3 and PyMySQL; ``"qmark"``,
    ``"numeric"``, ``"named"`` and ``"pyformat"`` are accepted too).
    Holds no connection; safe to share between threads.
    """

    def __init__(self, dialect: str = POSTGRES, table: str = DEFAULT_TABLE, paramstyle: str = "format") -> None:
        if dialect not in (POSTGRES, MYSQL):
            raise ValueError(f"sqlfence: unknown dialect {dialect!r}: want 'postgres' or 'mysql'")
        if not table:
            table = DEFAULT_TABLE
        if not isinstance(table, str) or not _IDENTIFIER.fullmatch(table):
            raise ValueError(
                f"sqlfence: table name {table!r}: want an SQL identifier (letters, digits, _; optionally schema.table)"
            )
        if paramstyle not in _PARAMSTYLES:
            raise ValueError(f"sqlfence: unknown paramstyle {paramstyle!r}: want one of {', '.join(_PARAMSTYLES)}")
        self.dialect = dialect
        self.table = table
        self.paramstyle = paramstyle
        self._verified = False
        t = table
        if dialect == POSTGRES:
            # One statement each: the row is inserted or, if the lock has
            # one, updated only when the sequencer is current; RETURNING
            # says which. A row that exists is locked either way until the
            # transaction ends.
            self._exclusive = (
                f"INSERT INTO {t} AS f (lock_name, slot, exclusive_token, any_token) VALUES ($1, $2, $3::numeric, $3::numeric)\n"
                "ON CONFLICT (lock_name, slot) DO UPDATE SET exclusive_token = EXCLUDED.exclusive_token, any_token = EXCLUDED.any_token\n"
                "WHERE f.any_token <= EXCLUDED.any_token RETURNING f.any_token"
            )
            self._shared = (
                f"INSERT INTO {t} AS f (lock_name, slot, exclusive_token, any_token) VALUES ($1, $2, 0, $3::numeric)\n"
                "ON CONFLICT (lock_name, slot) DO UPDATE SET any_token = GREATEST(f.any_token, EXCLUDED.any_token)\n"
                "WHERE f.exclusive_token <= EXCLUDED.any_token RETURNING f.any_token"
            )
            self._read = f"SELECT exclusive_token, any_token FROM {t} WHERE lock_name = $1 AND slot = $2"
        else:
            # No conditional upsert in MySQL: the update keeps the old marks
            # unless the sequencer is current (assignments run left to
            # right), then the row (this transaction's own write, locked)
            # is read back to learn which.
            self._exclusive = (
                f"INSERT INTO {t} (lock_name, slot, exclusive_token, any_token) VALUES (?, ?, ?, ?)\n"
                "ON DUPLICATE KEY UPDATE any_token = IF(any_token <= VALUES(any_token), VALUES(any_token), any_token),\n"
                "exclusive_token = IF(any_token = VALUES(any_token), VALUES(exclusive_token), exclusive_token)"
            )
            self._shared = (
                f"INSERT INTO {t} (lock_name, slot, exclusive_token, any_token) VALUES (?, ?, 0, ?)\n"
                "ON DUPLICATE KEY UPDATE any_token = IF(exclusive_token <= VALUES(any_token), "
                "GREATEST(any_token, VALUES(any_token)), any_token)"
            )
            self._read = f"SELECT exclusive_token, any_token FROM {t} WHERE lock_name = ? AND slot = ?"

    def schema(self) -> str:
        """The CREATE TABLE statement of the fence table."""
        if self.dialect == MYSQL:
            # utf8mb4_bin compares bytes, as raftlock does.
            name, token = "VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "BIGINT UNSIGNED"
        else:
            # Tokens are unsigned 64-bit: NUMERIC(20) (no unsigned BIGINT).
            name, token = "text", "NUMERIC(20)"
        return (
            f"CREATE TABLE IF NOT EXISTS {self.table} (\n"
            f"  lock_name       {name} NOT NULL,\n"
            "  slot            INTEGER NOT NULL,\n"
            f"  exclusive_token {token} NOT NULL,\n"
            f"  any_token       {token} NOT NULL,\n"
            "  PRIMARY KEY (lock_name, slot)\n"
            ")"
        )

    def statements(self) -> tuple[str, str, str]:
        """The exclusive upsert, the shared upsert and the read-back, as
        the Go package prints them (``$n`` placeholders for PostgreSQL,
        ``?`` for MySQL); check runs them in the driver's paramstyle."""
        return self._exclusive, self._shared, self._read

    def check(self, cursor: Any, seq: Sequencer | str) -> None:
        """Admits ``seq`` in the cursor's transaction, raising its lock's
        marks, or raises: StaleSequencer (a newer grant's writer came
        first), MalformedSequencer (not a valid sequencer), SchemaError
        (no fence table, or a wrong one), or the driver's own error. On
        any error the caller must roll back and not write; on success it
        writes with the same connection and commits. The lock's fence row
        stays locked until the transaction ends.

        The connection must not be in autocommit mode: the check and the
        writes must be one transaction (DB-API connections are not, by
        default)."""
        s = Sequencer.parse(seq) if isinstance(seq, str) else seq
        if not isinstance(s, Sequencer):
            raise MalformedSequencer(f"sqlfence: {seq!r} is not a sequencer")
        s.validate()
        self._verify(cursor)
        try:
            admitted = self._upsert(cursor, s)
        except Exception as e:
            if _schema_error(e):
                self._verified = False
                raise SchemaError(
                    f"sqlfence: check {s}: table {self.table}: {e} (create it with SQLFence.schema())"
                ) from e
            raise
        if not admitted:
            raise StaleSequencer(f"sqlfence: {s}: the fence table {self.table} has seen a newer grant of lock {s.name!r}")

    def _upsert(self, cursor: Any, s: Sequencer) -> bool:
        if s.slot is not None:
            # A slot's grant: toward the lock as a reader (stale only below
            # a newer exclusive grant; it raises the lock's highest token),
            # within its slot as a writer (stale below any newer grant of
            # the slot). As Go's sqlfence.
            return self._upsert_row(cursor, s, _LOCK_LEVEL, True) and self._upsert_row(cursor, s, s.slot, False)
        return self._upsert_row(cursor, s, _LOCK_LEVEL, s.mode == SHARED)

    def _upsert_row(self, cursor: Any, s: Sequencer, slot: int, shared: bool) -> bool:
        if self.dialect == POSTGRES:
            self._execute(cursor, self._shared if shared else self._exclusive, [s.name, slot, str(s.token)])
            return cursor.fetchone() is not None
        if shared:
            self._execute(cursor, self._shared, [s.name, slot, s.token])
        else:
            self._execute(cursor, self._exclusive, [s.name, slot, s.token, s.token])
        self._execute(cursor, self._read, [s.name, slot])
        row = cursor.fetchone()
        if row is None:
            raise RuntimeError(f"sqlfence: check {s}: the fence row vanished after its upsert")
        excl, any_ = int(row[0]), int(row[1])
        if shared:
            return excl <= s.token
        return excl == s.token and any_ == s.token

    def _verify(self, cursor: Any) -> None:
        """Checks, once (again after a schema error), that the table has
        the columns of schema() and the primary key (lock_name, slot):
        without that key MySQL would add a row per check instead of
        raising one, and the fence would admit everything."""
        if self._verified:
            return
        schema, _, table = self.table.rpartition(".")
        if self.dialect == POSTGRES:
            q = (
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)\n"
                "WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)"
            )
            args: list[Any] = [self.table]
            probe = f"SELECT lock_name, slot, exclusive_token, any_token FROM {self.table} WHERE false"
        else:
            q = (
                "SELECT column_name FROM information_schema.key_column_usage\n"
                "WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? "
                "AND constraint_name = 'PRIMARY' ORDER BY ordinal_position"
            )
            args = [schema, table]
            probe = f"SELECT lock_name, slot, exclusive_token, any_token FROM {self.table} WHERE 1 = 0"
        self._execute(cursor, q, args)
        key = [str(r[0]).lower() for r in cursor.fetchall()]
        if key != ["lock_name", "slot"]:
            if not key:
                raise SchemaError(
                    f"sqlfence: table {self.table} does not exist or has no primary key (create it with SQLFence.schema())"
                )
            raise SchemaError(
                f"sqlfence: table {self.table} has primary key ({', '.join(key)}), want (lock_name, slot) (see SQLFence.schema())"
            )
        try:
            cursor.execute(probe)
            cursor.fetchall()
        except Exception as e:
            if _schema_error(e):
                raise SchemaError(f"sqlfence: table {self.table}: {e} (see SQLFence.schema())") from e
            raise
        self._verified = True

    def _execute(self, cursor: Any, sql: str, args: list[Any]) -> None:
        """Runs sql, written with $n (PostgreSQL) or ? (MySQL) placeholders,
        in the driver's paramstyle."""
        out: list[Any] = []
        named: dict[str, Any] = {}

        def repl(m: re.Match[str]) -> str:
            v = args[int(m.group(1)) - 1] if m.group(1) else args[len(out)]
            out.append(v)
            n = len(out)
            if self.paramstyle in ("format", "pyformat"):
                return "%s"
            if self.paramstyle == "qmark":
                return "?"
            if self.paramstyle == "numeric":
                return f":{n}"
            named[f"p{n}"] = v
            return f":p{n}"

        text = _PLACEHOLDER.sub(repl, sql)
        cursor.execute(text, named if self.paramstyle == "named" else out)


def _schema_error(e: BaseException) -> bool:
    """Whether e is the database saying the table or a column does not
    exist (or no unique key matches ON CONFLICT)."""
    state = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
    if state in _SCHEMA_STATES:
        return True
    if e.args and isinstance(e.args[0], int) and e.args[0] in _SCHEMA_ERRNOS:
        return True
    msg = str(e)
    return any(m in msg for m in ("42P01", "42703", "42P10", "42S02", "42S22", "doesn't exist", "Unknown column"))
