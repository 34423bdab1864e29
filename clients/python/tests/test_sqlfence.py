"""The SQL fence (raftlock.sqlfence): its SQL against the shared file, and
its verdicts against real PostgreSQL (psycopg 3) and MariaDB (PyMySQL)
servers.

The database tests take their servers from RAFTLOCK_TEST_PG_DSN (a libpq
URL) and RAFTLOCK_TEST_MYSQL_DSN (mysql://user@host:port/db), as
``go run ./cmd/internal/withdb -- python3 -m pytest tests/test_sqlfence.py``
sets them; without them they skip, unless RAFTLOCK_REQUIRE_POSTGRES=1 or
RAFTLOCK_REQUIRE_MARIADB=1 (CI), when they fail.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse

import pytest

from raftlock import MalformedSequencer, Sequencer, StaleSequencer
from raftlock.sqlfence import DEFAULT_TABLE, MYSQL, POSTGRES, SchemaError, SQLFence

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")


def load(name):
    with open(os.path.join(ROOT, "testdata", name), encoding="utf-8") as f:
        return json.load(f)


# --- without a database ---


@pytest.mark.parametrize("dialect", [POSTGRES, MYSQL])
def test_sqlfence_sql_is_byte_identical_to_the_shared_file(dialect):
    want = load("sqlfence-statements.json")[dialect]
    f = SQLFence(dialect)
    assert want["table"] == DEFAULT_TABLE == f.table
    assert f.schema() == want["schema"]
    assert f.statements() == (want["exclusive"], want["shared"], want["read_back"])


@pytest.mark.parametrize("bad", ["a;drop table x", "1abc", "a.b.c", "a" * 64, "a\n", "t'", "é"])
def test_sqlfence_refuses_a_table_name_that_is_not_an_identifier(bad):
    with pytest.raises(ValueError):
        SQLFence(POSTGRES, bad)


def test_sqlfence_refuses_unknown_dialects_and_paramstyles():
    with pytest.raises(ValueError):
        SQLFence("oracle")
    with pytest.raises(ValueError):
        SQLFence(POSTGRES, paramstyle="dollar")
    assert SQLFence(MYSQL, "app.fence").table == "app.fence"


class RecordingCursor:
    """A DB-API cursor that records what it is asked to run."""

    def __init__(self):
        self.calls = []

    def execute(self, sql, args=None):
        self.calls.append((sql, args))


@pytest.mark.parametrize(
    "style,sql,args",
    [
        ("format", "VALUES (%s, %s, %s::numeric, %s::numeric, %s, 0)", ["n", -1, "7", "7", 3]),
        ("qmark", "VALUES (?, ?, ?::numeric, ?::numeric, ?, 0)", ["n", -1, "7", "7", 3]),
        ("numeric", "VALUES (:1, :2, :3::numeric, :4::numeric, :5, 0)", ["n", -1, "7", "7", 3]),
        (
            "named",
            "VALUES (:p1, :p2, :p3::numeric, :p4::numeric, :p5, 0)",
            {"p1": "n", "p2": -1, "p3": "7", "p4": "7", "p5": 3},
        ),
    ],
)
def test_sqlfence_runs_its_statements_in_the_drivers_paramstyle(style, sql, args):
    got_sql, got_args, _ = SQLFence(POSTGRES, paramstyle=style)._op(SQLFence(POSTGRES).statements()[0], ["n", -1, "7", 3])
    assert sql in got_sql and "$" not in got_sql
    assert got_args == args


class FakeAsyncCursor:
    """An asyncio cursor (psycopg's AsyncCursor's shape): execute and
    fetchone are coroutine functions. It answers every fetch with a row,
    which a blocking check that does not await would take for an admitted
    upsert."""

    def __init__(self):
        self.ran = []

    async def execute(self, sql, args=None):
        self.ran.append(sql)

    async def fetchone(self):
        return ("1",)

    async def fetchall(self):
        return [("lock_name",), ("slot",)]


class CoroutineReturningCursor:
    """A cursor whose plain methods hand back coroutines (a wrapped async
    driver): nothing runs unless awaited."""

    def __init__(self):
        self.inner = FakeAsyncCursor()

    def execute(self, sql, args=None):
        return self.inner.execute(sql, args)

    def fetchone(self):
        return self.inner.fetchone()

    def fetchall(self):
        return self.inner.fetchall()


def verified_fence(dialect=POSTGRES):
    """A fence that a blocking cursor already verified: the state of the
    report, where check skips the schema query and goes to the upsert."""
    f = SQLFence(dialect)
    f._verified = True
    return f


def test_sqlfence_check_refuses_an_asyncio_cursor_and_never_admits():
    for cursor in (FakeAsyncCursor(), CoroutineReturningCursor()):
        with pytest.raises(TypeError, match="check_async"):
            verified_fence().check(cursor, "rl1:x:5:a")


def test_sqlfence_check_refuses_what_is_not_a_cursor():
    class NoFetch:
        def execute(self, sql, args=None):
            pass

    for bad in (None, object(), NoFetch(), "cursor"):
        with pytest.raises(TypeError, match="DB-API cursor"):
            verified_fence().check(bad, "rl1:x:5:a")


def test_sqlfence_check_async_awaits_the_cursor():
    import asyncio

    c = FakeAsyncCursor()
    f = SQLFence(POSTGRES)
    asyncio.run(f.check_async(c, "rl1:p1/2:5:a"))
    # verify (key, probe), then the lock row and the slot row
    assert len(c.ran) == 4 and "permits" in c.ran[1] and c.ran[2].startswith("INSERT") and c.ran[3].startswith("INSERT")


def test_sqlfence_refuses_a_malformed_sequencer_before_touching_the_database():
    c = RecordingCursor()
    f = SQLFence(MYSQL)
    for bad in ["rl1:x:0:a", "", "rl1:y:1:a", Sequencer("", "exclusive", 1), 42]:
        with pytest.raises(MalformedSequencer):
            f.check(c, bad)
    assert c.calls == []


# --- against real servers ---


class Engine:
    def __init__(self, dialect, connect, lock_waits, serial):
        self.dialect, self.connect, self.lock_waits, self.serial = dialect, connect, lock_waits, serial


def postgres():
    dsn = os.environ.get("RAFTLOCK_TEST_PG_DSN")
    if not dsn:
        if os.environ.get("RAFTLOCK_REQUIRE_POSTGRES") == "1":
            pytest.fail("RAFTLOCK_TEST_PG_DSN is unset and RAFTLOCK_REQUIRE_POSTGRES=1 (run under cmd/internal/withdb)")
        pytest.skip("RAFTLOCK_TEST_PG_DSN is unset (run under go run ./cmd/internal/withdb)")
    import psycopg

    return Engine(
        POSTGRES,
        lambda: psycopg.connect(dsn),
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
        "bigserial",
    )


def mariadb():
    dsn = os.environ.get("RAFTLOCK_TEST_MYSQL_DSN")
    if not dsn:
        if os.environ.get("RAFTLOCK_REQUIRE_MARIADB") == "1":
            pytest.fail("RAFTLOCK_TEST_MYSQL_DSN is unset and RAFTLOCK_REQUIRE_MARIADB=1 (run under cmd/internal/withdb)")
        pytest.skip("RAFTLOCK_TEST_MYSQL_DSN is unset (run under go run ./cmd/internal/withdb)")
    import pymysql

    u = urllib.parse.urlparse(dsn)
    return Engine(
        MYSQL,
        lambda: pymysql.connect(
            host=u.hostname, port=u.port or 3306, user=u.username, password=u.password or "", database=u.path.lstrip("/")
        ),
        "SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'INSERT INTO raftlock_fence%'",
        "bigint AUTO_INCREMENT",
    )


@pytest.fixture(params=["postgres", "mariadb"])
def engine(request):
    e = postgres() if request.param == "postgres" else mariadb()
    conn = e.connect()
    # Each test starts from no tables of its own.
    with conn.cursor() as c:
        for t in (DEFAULT_TABLE, "stock", "writes", "fence_missing", "fence_nokey", "fence_otherkey", "fence_nocol", "fence_old"):
            c.execute(f"DROP TABLE IF EXISTS {t}")
    conn.commit()
    e.admin = conn
    yield e
    conn.close()


def fence(e, table=DEFAULT_TABLE):
    f = SQLFence(e.dialect, table)
    with e.admin.cursor() as c:
        c.execute(f.schema())
    e.admin.commit()
    return f


def fenced(conn, f, seq, write=None):
    """One fenced transaction: check, then the write, then commit; on any
    error, rollback."""
    try:
        with conn.cursor() as c:
            f.check(c, seq)
            if write:
                write(c)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def verdict(conn, f, seq):
    try:
        fenced(conn, f, seq)
    except StaleSequencer:
        return "stale"
    except MalformedSequencer:
        return "malformed"
    return "admit"


def test_sqlfence_gives_the_shared_vectors_verdicts(engine):
    f = fence(engine)
    conn = engine.connect()
    try:
        for v in load("fence-vectors.json")["vectors"]:
            with engine.admin.cursor() as c:
                c.execute(f"DELETE FROM {DEFAULT_TABLE}")
            engine.admin.commit()
            got = [verdict(conn, f, st["sequencer"]) for st in v["steps"]]
            assert got == [st["verdict"] for st in v["steps"]], v["name"]
    finally:
        conn.close()


def test_sqlfence_keeps_names_that_differ_in_trailing_spaces_apart(engine):
    # Two names, two locks: a PAD SPACE collation would fold "a " into "a".
    f = fence(engine)
    conn = engine.connect()
    try:
        steps = [
            ("rl1:x:10:a", "admit"),
            ("rl1:x:5:a ", "admit"),
            ("rl1:x:20:a ", "admit"),
            ("rl1:x:11:a", "admit"),
            ("rl1:x:9:a", "stale"),
            ("rl1:x:19:a ", "stale"),
        ]
        assert [verdict(conn, f, seq) for seq, _ in steps] == [want for _, want in steps]
        with engine.admin.cursor() as c:
            c.execute(f"SELECT count(*) FROM {DEFAULT_TABLE} WHERE slot = -1")
            assert c.fetchone()[0] == 2
        engine.admin.commit()
    finally:
        conn.close()


def test_sqlfence_refusal_names_the_later_tenures_token(engine):
    f = fence(engine)
    conn = engine.connect()
    try:
        fenced(conn, f, "rl1:p2/3:54:pool")
        fenced(conn, f, "rl1:p0/1:68:pool")
        with pytest.raises(StaleSequencer) as e:
            fenced(conn, f, "rl1:p2/3:54:pool")
        for want in ("54", "68", "kind or permits changed"):
            assert want in str(e.value)
    finally:
        conn.close()


def test_sqlfence_orders_writes_of_old_and_new_holders(engine):
    f = fence(engine)
    with engine.admin.cursor() as c:
        c.execute("CREATE TABLE stock (item int PRIMARY KEY, qty int NOT NULL, last_token bigint NOT NULL)")
        c.execute("INSERT INTO stock VALUES (1, 100, 0)")
    engine.admin.commit()

    def deduct(tok):
        return lambda c: c.execute("UPDATE stock SET qty = qty - 1, last_token = %s WHERE item = 1", [tok])

    old, new = engine.connect(), engine.connect()
    try:
        # Holder 5 checks and writes, and has not committed yet.
        with old.cursor() as c:
            f.check(c, "rl1:x:5:stock/1")
            deduct(5)(c)
        # Holder 6 checks meanwhile: it must wait for 5's transaction.
        result = []
        t = threading.Thread(target=lambda: result.append(_outcome(lambda: fenced(new, f, "rl1:x:6:stock/1", deduct(6)))))
        t.start()
        wait_for_lock_wait(engine)
        assert t.is_alive() and not result, f"the newer holder's check did not wait: {result}"
        old.commit()
        t.join(30)
        assert result == [None]
        # Holder 5 again, after 6 committed: refused, nothing written.
        with pytest.raises(StaleSequencer):
            fenced(old, f, "rl1:x:5:stock/1", deduct(5))
        with engine.admin.cursor() as c:
            c.execute("SELECT qty, last_token FROM stock WHERE item = 1")
            assert tuple(int(x) for x in c.fetchone()) == (98, 6)
        engine.admin.commit()
    finally:
        old.close()
        new.close()


def _outcome(f):
    try:
        f()
    except Exception as e:  # reported to the test's thread
        return e
    return None


def wait_for_lock_wait(engine):
    """Waits until some transaction waits for a row lock."""
    conn = engine.connect()
    try:
        deadline = time.monotonic() + 30
        while True:
            with conn.cursor() as c:
                c.execute(engine.lock_waits)
                n = c.fetchone()[0]
            conn.commit()
            if n > 0:
                return
            assert time.monotonic() < deadline, "no transaction waited for the fence row in 30 s"
            time.sleep(0.005)
    finally:
        conn.close()


def test_sqlfence_refuses_wrong_schemas_and_admits_nothing(engine):
    name = "text" if engine.dialect == POSTGRES else "varchar(512)"
    cases = [
        ("fence_missing", None, "does not exist or has no primary key"),
        (
            "fence_nokey",
            f"CREATE TABLE fence_nokey (lock_name {name}, slot int, exclusive_token bigint, any_token bigint)",
            "does not exist or has no primary key",
        ),
        (
            "fence_otherkey",
            f"CREATE TABLE fence_otherkey (lock_name {name} PRIMARY KEY, slot int, exclusive_token bigint, any_token bigint)",
            "has primary key (lock_name)",
        ),
        (
            "fence_nocol",
            f"CREATE TABLE fence_nocol (lock_name {name}, slot int, exclusive_token bigint, PRIMARY KEY (lock_name, slot))",
            "any_token",
        ),
        (
            "fence_old",  # a table of before the tenure columns
            f"CREATE TABLE fence_old (lock_name {name}, slot int, exclusive_token bigint, any_token bigint, "
            "PRIMARY KEY (lock_name, slot))",
            "permits and other_token",
        ),
    ]
    conn = engine.connect()
    try:
        for table, ddl, want in cases:
            if ddl:
                with engine.admin.cursor() as c:
                    c.execute(ddl)
                engine.admin.commit()
            with pytest.raises(SchemaError, match=want.replace("(", r"\(").replace(")", r"\)")):
                fenced(conn, SQLFence(engine.dialect, table), "rl1:x:5:a")
        # Nothing was written to the tables that exist.
        with engine.admin.cursor() as c:
            for table, ddl, _ in cases:
                if ddl:
                    c.execute(f"SELECT count(*) FROM {table}")
                    assert c.fetchone()[0] == 0, table
        engine.admin.commit()
    finally:
        conn.close()


def test_sqlfence_finds_a_table_dropped_after_it_was_verified(engine):
    f = fence(engine)
    conn = engine.connect()
    try:
        fenced(conn, f, "rl1:x:5:a")
        with engine.admin.cursor() as c:
            c.execute(f"DROP TABLE {DEFAULT_TABLE}")
        engine.admin.commit()
        with pytest.raises(SchemaError):
            fenced(conn, f, "rl1:x:6:a")
    finally:
        conn.close()


def test_sqlfence_refuses_malformed_input_and_changes_nothing(engine):
    f = fence(engine)
    conn = engine.connect()
    try:
        for bad in ["rl1:x:0:a", "rl1:x:18446744073709551616:a", "rl1:q:1:a", "rl1:x:1:"]:
            with pytest.raises(MalformedSequencer):
                fenced(conn, f, bad)
        with engine.admin.cursor() as c:
            c.execute(f"SELECT count(*) FROM {DEFAULT_TABLE}")
            assert c.fetchone()[0] == 0
        engine.admin.commit()
        # The largest token round-trips through the table.
        fenced(conn, f, "rl1:x:18446744073709551615:a")
        with pytest.raises(StaleSequencer):
            fenced(conn, f, "rl1:x:18446744073709551614:a")
    finally:
        conn.close()


def test_the_readmes_sqlfence_example_deducts_once_per_current_holder(engine):
    with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as f:
        text = f.read()
    code = text.split("<!-- sqlfence example -->\n```python\n", 1)[1].split("```", 1)[0]
    assert 'SQLFence("postgres")' in code
    code = code.replace('SQLFence("postgres")', f"SQLFence({engine.dialect!r})")
    env = {"__name__": "__readme__"}
    exec(compile(code, "README.md", "exec"), env)
    fence = env["fence"]
    with engine.admin.cursor() as c:
        c.execute(fence.schema())
        c.execute("CREATE TABLE stock (item int PRIMARY KEY, qty int NOT NULL)")
        c.execute("INSERT INTO stock VALUES (1, 10)")
    engine.admin.commit()
    conn = engine.connect()
    try:
        deduct = env["deduct_stock"]
        assert deduct(conn, "rl1:x:5:stock/1")
        assert deduct(conn, "rl1:x:6:stock/1")
        assert not deduct(conn, "rl1:x:5:stock/1")
        with engine.admin.cursor() as c:
            c.execute("SELECT qty FROM stock WHERE item = 1")
            assert c.fetchone()[0] == 8
        engine.admin.commit()
    finally:
        conn.close()


def test_sqlfence_never_admits_when_the_database_drops_the_connection(engine):
    f = fence(engine)
    conn = engine.connect()
    try:
        fenced(conn, f, "rl1:x:5:a")
        with conn.cursor() as c:
            c.execute("SELECT pg_backend_pid()" if engine.dialect == POSTGRES else "SELECT CONNECTION_ID()")
            me = c.fetchone()[0]
        conn.commit()
        # The server ends the writer's connection (as a restart or a failover would).
        with engine.admin.cursor() as c:
            c.execute(f"SELECT pg_terminate_backend({int(me)})" if engine.dialect == POSTGRES else f"KILL {int(me)}")
        engine.admin.commit()
        gone = (
            f"SELECT count(*) FROM pg_stat_activity WHERE pid = {int(me)}"
            if engine.dialect == POSTGRES
            else f"SELECT count(*) FROM information_schema.processlist WHERE id = {int(me)}"
        )
        deadline = time.monotonic() + 30
        while True:
            with engine.admin.cursor() as c:
                c.execute(gone)
                n = c.fetchone()[0]
            engine.admin.commit()
            if n == 0:
                break
            assert time.monotonic() < deadline, "the killed connection did not end in 30 s"
            time.sleep(0.005)
        with pytest.raises(Exception) as e:
            with conn.cursor() as c:
                f.check(c, "rl1:x:6:a")
        assert not isinstance(e.value, (StaleSequencer, MalformedSequencer, SchemaError)), e.value
    finally:
        try:
            conn.close()
        except Exception:
            pass
    # Nothing was admitted: the mark is still 5's.
    with engine.admin.cursor() as c:
        c.execute(f"SELECT any_token FROM {DEFAULT_TABLE}")
        assert [int(r[0]) for r in c.fetchall()] == [5]
    engine.admin.commit()


def test_sqlfence_committed_tokens_never_go_back(engine):
    """Holders racing each other's transactions with tokens in no order:
    every write that commits carries a token at least as high as every
    write committed before it."""
    f = fence(engine)
    with engine.admin.cursor() as c:
        c.execute(f"CREATE TABLE writes (seq {engine.serial} PRIMARY KEY, token bigint NOT NULL)")
    engine.admin.commit()
    errors = []

    def writer(w):
        conn = engine.connect()
        try:
            for i in range(25):
                tok = 1 + (i * 6 + w) % 100
                try:
                    fenced(conn, f, f"rl1:x:{tok}:jobs/a", lambda c: c.execute("INSERT INTO writes (token) VALUES (%s)", [tok]))
                except StaleSequencer:
                    pass
                except Exception as e:  # a deadlock the database broke is no admission
                    if "eadlock" not in str(e) and "40P01" not in str(e):
                        errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    with engine.admin.cursor() as c:
        c.execute("SELECT token FROM writes ORDER BY seq")
        tokens = [int(r[0]) for r in c.fetchall()]
    engine.admin.commit()
    assert tokens and tokens == sorted(tokens)


# --- asyncio: psycopg's AsyncCursor against the real PostgreSQL ---


def async_postgres_dsn():
    e = postgres()  # skips, or fails under RAFTLOCK_REQUIRE_POSTGRES=1, without a server
    return e, os.environ["RAFTLOCK_TEST_PG_DSN"]


def test_sqlfence_check_async_gives_the_shared_vectors_verdicts_with_psycopg():
    import asyncio

    import psycopg

    e, dsn = async_postgres_dsn()
    admin = e.connect()
    try:
        with admin.cursor() as c:
            c.execute(f"DROP TABLE IF EXISTS {DEFAULT_TABLE}")
            c.execute(SQLFence(POSTGRES).schema())
        admin.commit()

        async def run():
            f = SQLFence(POSTGRES)
            conn = await psycopg.AsyncConnection.connect(dsn)
            try:
                for v in load("fence-vectors.json")["vectors"]:
                    async with conn.cursor() as c:
                        await c.execute(f"DELETE FROM {DEFAULT_TABLE}")
                    await conn.commit()
                    got = []
                    for st in v["steps"]:
                        try:
                            async with conn.cursor() as c:
                                await f.check_async(c, st["sequencer"])
                            await conn.commit()
                            got.append("admit")
                        except StaleSequencer:
                            await conn.rollback()
                            got.append("stale")
                        except MalformedSequencer:
                            await conn.rollback()
                            got.append("malformed")
                    assert got == [st["verdict"] for st in v["steps"]], v["name"]
            finally:
                await conn.close()

        asyncio.run(run())
    finally:
        admin.close()


def test_sqlfence_verified_with_a_blocking_cursor_refuses_a_stale_async_write():
    """The report: a fence verified with a blocking cursor, then handed an
    AsyncCursor and a stale sequencer, returned and admitted the write.
    check now raises TypeError without writing, and check_async refuses
    the stale sequencer."""
    import asyncio

    import psycopg

    e, dsn = async_postgres_dsn()
    admin = e.connect()
    try:
        with admin.cursor() as c:
            c.execute(f"DROP TABLE IF EXISTS {DEFAULT_TABLE}")
            c.execute(SQLFence(POSTGRES).schema())
        admin.commit()
        f = SQLFence(POSTGRES)
        fenced(admin, f, "rl1:x:10:stock")

        async def run():
            conn = await psycopg.AsyncConnection.connect(dsn)
            try:
                async with conn.cursor() as c:
                    with pytest.raises(TypeError, match="check_async"):
                        f.check(c, "rl1:x:9:stock")
                await conn.rollback()
                async with conn.cursor() as c:
                    with pytest.raises(StaleSequencer):
                        await f.check_async(c, "rl1:x:9:stock")
                await conn.rollback()
                async with conn.cursor() as c:
                    await f.check_async(c, "rl1:x:11:stock")
                await conn.commit()
            finally:
                await conn.close()

        asyncio.run(run())
        with admin.cursor() as c:
            c.execute(f"SELECT any_token FROM {DEFAULT_TABLE} WHERE lock_name = 'stock' AND slot = -1")
            assert int(c.fetchone()[0]) == 11
        admin.commit()
    finally:
        admin.close()


def test_the_readmes_async_sqlfence_example_deducts_once_per_current_holder():
    import asyncio

    import psycopg

    e, dsn = async_postgres_dsn()
    with open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    code = text.split("<!-- sqlfence async example -->\n```python\n", 1)[1].split("```", 1)[0]
    env = {"__name__": "__readme__"}
    exec(compile(code, "README.md", "exec"), env)
    admin = e.connect()
    try:
        with admin.cursor() as c:
            for t in (DEFAULT_TABLE, "stock"):
                c.execute(f"DROP TABLE IF EXISTS {t}")
            c.execute(env["fence"].schema())
            c.execute("CREATE TABLE stock (item int PRIMARY KEY, qty int NOT NULL)")
            c.execute("INSERT INTO stock VALUES (1, 10)")
        admin.commit()

        async def run():
            conn = await psycopg.AsyncConnection.connect(dsn)
            try:
                deduct = env["deduct_stock_async"]
                assert await deduct(conn, "rl1:p0/2:5:stock/1")
                assert await deduct(conn, "rl1:p1/2:6:stock/1")
                assert await deduct(conn, "rl1:p0/1:7:stock/1")
                assert not await deduct(conn, "rl1:p1/2:6:stock/1")  # the semaphore of 2 is gone
            finally:
                await conn.close()

        asyncio.run(run())
        with admin.cursor() as c:
            c.execute("SELECT qty FROM stock WHERE item = 1")
            assert c.fetchone()[0] == 7
        admin.commit()
    finally:
        admin.close()
