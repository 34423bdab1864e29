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

import inspect
import re
from collections.abc import Generator
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

# One statement of a check: its SQL in the driver's paramstyle, its
# arguments (None: run without), and what to fetch after it ("one", "all"
# or None).
_Op = tuple[str, Any, str | None]


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
                f"INSERT INTO {t} AS f (lock_name, slot, exclusive_token, any_token, permits, other_token) "
                "VALUES ($1, $2, $3::numeric, $3::numeric, $4, 0)\n"
                "ON CONFLICT (lock_name, slot) DO UPDATE SET exclusive_token = EXCLUDED.exclusive_token, "
                "any_token = EXCLUDED.any_token,\n"
                "permits = CASE WHEN f.any_token < EXCLUDED.any_token THEN EXCLUDED.permits ELSE f.permits END,\n"
                "other_token = CASE WHEN f.any_token < EXCLUDED.any_token AND f.permits <> EXCLUDED.permits "
                "THEN f.any_token ELSE f.other_token END\n"
                "WHERE f.any_token <= EXCLUDED.any_token RETURNING f.any_token"
            )
            self._shared = (
                f"INSERT INTO {t} AS f (lock_name, slot, exclusive_token, any_token, permits, other_token) "
                "VALUES ($1, $2, 0, $3::numeric, $4, 0)\n"
                "ON CONFLICT (lock_name, slot) DO UPDATE SET any_token = GREATEST(f.any_token, EXCLUDED.any_token),\n"
                "permits = CASE WHEN f.any_token < EXCLUDED.any_token THEN EXCLUDED.permits ELSE f.permits END,\n"
                "other_token = CASE WHEN f.any_token < EXCLUDED.any_token AND f.permits <> EXCLUDED.permits "
                "THEN f.any_token ELSE f.other_token END\n"
                "WHERE f.exclusive_token <= EXCLUDED.any_token\n"
                "AND CASE WHEN f.permits = EXCLUDED.permits THEN f.other_token ELSE f.any_token END "
                "<= EXCLUDED.any_token RETURNING f.any_token"
            )
            self._read = (
                f"SELECT exclusive_token, any_token, permits, other_token FROM {t} WHERE lock_name = $1 AND slot = $2"
            )
        else:
            # No conditional upsert in MySQL: the update keeps the old marks
            # unless the sequencer is current (assignments run left to
            # right), then the row (this transaction's own write, locked)
            # is read back to learn which.
            self._exclusive = (
                f"INSERT INTO {t} (lock_name, slot, exclusive_token, any_token, permits, other_token) "
                "VALUES (?, ?, ?, ?, ?, 0)\n"
                "ON DUPLICATE KEY UPDATE other_token = IF(any_token < VALUES(any_token) AND permits <> VALUES(permits), "
                "any_token, other_token),\n"
                "permits = IF(any_token < VALUES(any_token), VALUES(permits), permits),\n"
                "any_token = IF(any_token <= VALUES(any_token), VALUES(any_token), any_token),\n"
                "exclusive_token = IF(any_token = VALUES(any_token), VALUES(exclusive_token), exclusive_token)"
            )
            self._shared = (
                f"INSERT INTO {t} (lock_name, slot, exclusive_token, any_token, permits, other_token) "
                "VALUES (?, ?, 0, ?, ?, 0)\n"
                "ON DUPLICATE KEY UPDATE other_token = IF(any_token < VALUES(any_token) AND permits <> VALUES(permits), "
                "any_token, other_token),\n"
                "permits = IF(any_token < VALUES(any_token), VALUES(permits), permits),\n"
                "any_token = IF(exclusive_token <= VALUES(any_token) AND "
                "IF(permits = VALUES(permits), other_token, any_token) <= VALUES(any_token),\n"
                "GREATEST(any_token, VALUES(any_token)), any_token)"
            )
            self._read = (
                f"SELECT exclusive_token, any_token, permits, other_token FROM {t} WHERE lock_name = ? AND slot = ?"
            )

    def schema(self) -> str:
        """The CREATE TABLE statement of the fence table."""
        if self.dialect == MYSQL:
            # Bytes, compared as raftlock does: names that differ in case or
            # in trailing spaces are two locks (utf8mb4_bin pads spaces).
            name, token = "VARBINARY(512)", "BIGINT UNSIGNED"
        else:
            # Tokens are unsigned 64-bit: NUMERIC(20) (no unsigned BIGINT).
            name, token = "text", "NUMERIC(20)"
        return (
            f"CREATE TABLE IF NOT EXISTS {self.table} (\n"
            f"  lock_name       {name} NOT NULL,\n"
            "  slot            INTEGER NOT NULL,\n"
            f"  exclusive_token {token} NOT NULL,\n"
            f"  any_token       {token} NOT NULL,\n"
            "  permits         INTEGER NOT NULL,\n"
            f"  other_token     {token} NOT NULL,\n"
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
        first, or one of a later tenure of the name), MalformedSequencer
        (not a valid sequencer), SchemaError (no fence table, or a wrong
        one), TypeError (``cursor`` is not a DB-API cursor: an asyncio
        cursor goes to ``check_async``), or the driver's own error. On any
        error the caller must roll back and not write; on success it
        writes with the same connection and commits. The lock's fence row
        stays locked until the transaction ends.

        The connection must not be in autocommit mode: the check and the
        writes must be one transaction (DB-API connections are not, by
        default)."""
        s = _sequencer(seq)
        _require_sync_cursor(cursor)
        steps = self._steps(s)
        try:
            op = next(steps)
            while True:
                try:
                    rows = self._run(cursor, op)
                except Exception as e:
                    op = steps.throw(e)
                else:
                    op = steps.send(rows)
        except StopIteration:
            return

    async def check_async(self, cursor: Any, seq: Sequencer | str) -> None:
        """``check`` for an asyncio driver's cursor (psycopg 3's
        ``AsyncCursor``, or any cursor whose ``execute`` and ``fetchone``
        are awaited): the same statements, verdicts and errors, each
        statement awaited in turn. The same rules about the transaction
        hold: check and writes in one transaction of the cursor's
        connection, which must not be in autocommit mode."""
        s = _sequencer(seq)
        _require_cursor(cursor)
        steps = self._steps(s)
        try:
            op = next(steps)
            while True:
                try:
                    rows = await self._run_async(cursor, op)
                except Exception as e:
                    op = steps.throw(e)
                else:
                    op = steps.send(rows)
        except StopIteration:
            return

    # The check is a generator of the statements to run, each a (sql,
    # args, fetch) with fetch "one" or "all"; it is sent the fetched rows
    # (or thrown the driver's error) and returns when s is admitted, or
    # raises. check and check_async run the same steps, with a blocking
    # and an awaiting cursor.

    def _steps(self, s: Sequencer) -> Generator[_Op, Any, None]:
        yield from self._verify_steps()
        try:
            if s.slot is not None:
                # A slot's grant: toward the lock as a reader (stale only
                # below a newer exclusive grant; it raises the lock's
                # highest token), within its slot as a writer (stale below
                # any newer grant of the slot). As Go's sqlfence.
                admitted = yield from self._upsert_row(s, _LOCK_LEVEL, True)
                if admitted:
                    admitted = yield from self._upsert_row(s, s.slot, False)
            else:
                admitted = yield from self._upsert_row(s, _LOCK_LEVEL, s.mode == SHARED)
        except Exception as e:
            if _schema_error(e):
                self._verified = False
                raise SchemaError(
                    f"sqlfence: check {s}: table {self.table}: {e} (create it with SQLFence.schema())"
                ) from e
            raise
        if not admitted:
            raise (yield from self._refusal(s))

    def _refusal(self, s: Sequencer) -> Generator[_Op, Any, StaleSequencer]:
        """The error of a refused check of s: reads the lock's row (locked
        by the refused upsert) to name the token that made s stale."""
        try:
            row = yield self._op(self._read, [s.name, _LOCK_LEVEL])
            any_, permits, other = int(row[1]), int(row[2]), int(row[3])
        except Exception:
            return StaleSequencer(f"sqlfence: {s}: the fence table {self.table} has seen a newer grant of lock {s.name!r}")
        if permits != s.config() and any_ > s.token:
            return StaleSequencer(
                f"sqlfence: {s}: token {s.token} is lower than token {any_} in the fence table {self.table}, "
                "granted after the name's kind or permits changed since the grant"
            )
        if permits == s.config() and other > s.token:
            return StaleSequencer(
                f"sqlfence: {s}: token {s.token} is lower than token {other} in the fence table {self.table}, "
                "of another kind or permits: the name's kind or permits changed since the grant"
            )
        return StaleSequencer(
            f"sqlfence: {s}: the fence table {self.table} has seen a newer grant of lock {s.name!r} (highest token {any_})"
        )

    def _upsert_row(self, s: Sequencer, slot: int, shared: bool) -> Generator[_Op, Any, bool]:
        config = s.config()
        if self.dialect == POSTGRES:
            row = yield self._op(self._shared if shared else self._exclusive, [s.name, slot, str(s.token), config])
            return row is not None
        if shared:
            yield self._op(self._shared, [s.name, slot, s.token, config], None)
        else:
            yield self._op(self._exclusive, [s.name, slot, s.token, s.token, config], None)
        row = yield self._op(self._read, [s.name, slot])
        if row is None:
            raise RuntimeError(f"sqlfence: check {s}: the fence row vanished after its upsert")
        excl, any_, permits, other = int(row[0]), int(row[1]), int(row[2]), int(row[3])
        if shared:
            # The tenure rule: below another config's highest token.
            below = other if permits == config else any_
            return excl <= s.token and below <= s.token
        return excl == s.token and any_ == s.token

    def _verify_steps(self) -> Generator[_Op, Any, None]:
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
            probe = f"SELECT lock_name, slot, exclusive_token, any_token, permits, other_token FROM {self.table} WHERE false"
        else:
            q = (
                "SELECT column_name FROM information_schema.key_column_usage\n"
                "WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? "
                "AND constraint_name = 'PRIMARY' ORDER BY ordinal_position"
            )
            args = [schema, table]
            probe = f"SELECT lock_name, slot, exclusive_token, any_token, permits, other_token FROM {self.table} WHERE 1 = 0"
        rows = yield self._op(q, args, "all")
        key = [str(r[0]).lower() for r in rows]
        if key != ["lock_name", "slot"]:
            if not key:
                raise SchemaError(
                    f"sqlfence: table {self.table} does not exist or has no primary key (create it with SQLFence.schema())"
                )
            raise SchemaError(
                f"sqlfence: table {self.table} has primary key ({', '.join(key)}), want (lock_name, slot) (see SQLFence.schema())"
            )
        try:
            yield (probe, None, "all")
        except Exception as e:
            if _schema_error(e):
                raise SchemaError(
                    f"sqlfence: table {self.table}: {e} (see SQLFence.schema(); a table without the permits and "
                    "other_token columns: docs/FENCING.md says how to add them)"
                ) from e
            raise
        self._verified = True

    def _op(self, sql: str, args: list[Any], fetch: str | None = "one") -> _Op:
        """The statement sql, written with $n (PostgreSQL) or ? (MySQL)
        placeholders, in the driver's paramstyle, with its arguments."""
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
        return text, (named if self.paramstyle == "named" else out), fetch

    @staticmethod
    def _run(cursor: Any, op: _Op) -> Any:
        sql, args, fetch = op
        r = cursor.execute(sql) if args is None else cursor.execute(sql, args)
        _refuse_awaitable(r, "execute")
        if fetch is None:
            return None
        r = cursor.fetchone() if fetch == "one" else cursor.fetchall()
        _refuse_awaitable(r, "fetch" + fetch)
        return r

    @staticmethod
    async def _run_async(cursor: Any, op: _Op) -> Any:
        sql, args, fetch = op
        r = cursor.execute(sql) if args is None else cursor.execute(sql, args)
        if inspect.isawaitable(r):
            await r
        if fetch is None:
            return None
        r = cursor.fetchone() if fetch == "one" else cursor.fetchall()
        if inspect.isawaitable(r):
            r = await r
        return r


def _sequencer(seq: Any) -> Sequencer:
    s = Sequencer.parse(seq) if isinstance(seq, str) else seq
    if not isinstance(s, Sequencer):
        raise MalformedSequencer(f"sqlfence: {seq!r} is not a sequencer")
    s.validate()
    return s


def _require_cursor(cursor: Any) -> None:
    """Raises TypeError unless cursor has the DB-API methods the check
    calls: a check that cannot run its statements must never admit."""
    for name in ("execute", "fetchone", "fetchall"):
        if not callable(getattr(cursor, name, None)):
            raise TypeError(
                f"sqlfence: check needs a DB-API cursor (with execute, fetchone and fetchall); "
                f"{type(cursor).__name__} has no {name}()"
            )


def _require_sync_cursor(cursor: Any) -> None:
    _require_cursor(cursor)
    for name in ("execute", "fetchone", "fetchall"):
        if inspect.iscoroutinefunction(getattr(cursor, name)):
            raise TypeError(
                f"sqlfence: {type(cursor).__name__}.{name} is a coroutine function: an asyncio cursor; "
                "use 'await SQLFence.check_async(cursor, seq)'"
            )


def _refuse_awaitable(r: Any, what: str) -> None:
    """Raises TypeError if a blocking check's cursor call gave an
    awaitable (an asyncio cursor whose methods are not coroutine
    functions): its statement did not run, and its rows are not rows."""
    if inspect.isawaitable(r):
        if inspect.iscoroutine(r):
            r.close()  # never awaited: no "was never awaited" warning
        raise TypeError(
            f"sqlfence: the cursor's {what}() returned an awaitable: an asyncio cursor; "
            "use 'await SQLFence.check_async(cursor, seq)'"
        )


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
