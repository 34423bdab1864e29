package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The SQL fence against real PostgreSQL and MariaDB servers, whose JDBC URLs
 * come from RAFTLOCK_TEST_PG_JDBC and RAFTLOCK_TEST_MYSQL_JDBC (as
 * {@code go run ./cmd/internal/withdb -- mvn ...} sets them). Without them
 * the tests are skipped, unless RAFTLOCK_REQUIRE_POSTGRES=1 or
 * RAFTLOCK_REQUIRE_MARIADB=1 (CI), when they fail.
 */
class SqlFenceDatabaseTest {
    private static final String[] TABLES = {SqlFence.DEFAULT_TABLE, "stock", "writes", "fence_missing", "fence_nokey",
        "fence_otherkey", "fence_nocol", "fence_old"};

    private static String url(SqlFence.Dialect d) {
        String env = d == SqlFence.Dialect.POSTGRES ? "RAFTLOCK_TEST_PG_JDBC" : "RAFTLOCK_TEST_MYSQL_JDBC";
        String require = d == SqlFence.Dialect.POSTGRES ? "RAFTLOCK_REQUIRE_POSTGRES" : "RAFTLOCK_REQUIRE_MARIADB";
        String url = System.getenv(env);
        if (url == null || url.isBlank()) {
            if ("1".equals(System.getenv(require))) {
                fail(env + " is unset and " + require + "=1 (run under go run ./cmd/internal/withdb)");
            }
            assumeTrue(false, env + " is unset (run under go run ./cmd/internal/withdb)");
        }
        return url;
    }

    /** A connection for one transaction at a time (autoCommit off). */
    private static Connection connect(SqlFence.Dialect d) throws SQLException {
        Connection c = DriverManager.getConnection(url(d));
        c.setAutoCommit(false);
        return c;
    }

    /** Runs DDL or DML and commits; starts each test from no tables of its own. */
    private static void exec(Connection c, String... sql) throws SQLException {
        try (Statement st = c.createStatement()) {
            for (String s : sql) {
                st.execute(s);
            }
        }
        c.commit();
    }

    private static Connection admin(SqlFence.Dialect d) throws SQLException {
        Connection c = connect(d);
        for (String t : TABLES) {
            exec(c, "DROP TABLE IF EXISTS " + t);
        }
        return c;
    }

    private static SqlFence fence(SqlFence.Dialect d, Connection admin) throws SQLException {
        SqlFence f = new SqlFence(d);
        exec(admin, f.schema());
        return f;
    }

    interface Write {
        void run(Connection c) throws SQLException;
    }

    /** One fenced transaction: check, write, commit; rollback on any error. */
    private static void fenced(Connection c, SqlFence f, String seq, Write write) throws Exception {
        try {
            f.check(c, seq);
            if (write != null) {
                write.run(c);
            }
            c.commit();
        } catch (Exception e) {
            c.rollback();
            throw e;
        }
    }

    private static String verdict(Connection c, SqlFence f, String seq) throws Exception {
        try {
            fenced(c, f, seq, null);
            return "admit";
        } catch (StaleSequencerException e) {
            return "stale";
        } catch (MalformedSequencerException e) {
            return "malformed";
        }
    }

    private static long count(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            long n = rs.getLong(1);
            c.commit();
            return n;
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void givesEverySharedVectorsVerdict(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection c = connect(d)) {
            SqlFence f = fence(d, admin);
            JsonNode root = new ObjectMapper().readTree(SqlFenceTest.testdata("fence-vectors.json"));
            int steps = 0;
            for (JsonNode v : root.path("vectors")) {
                exec(admin, "DELETE FROM " + SqlFence.DEFAULT_TABLE);
                int i = 0;
                for (JsonNode st : v.path("steps")) {
                    assertEquals(st.path("verdict").asText(), verdict(c, f, st.path("sequencer").asText()),
                            v.path("name").asText() + ", step " + i++);
                    steps++;
                }
            }
            assertTrue(steps > 20, "the vectors file has steps (" + steps + ")");
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void ordersWritesOfOldAndNewHolders(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection old = connect(d); Connection neu = connect(d)) {
            SqlFence f = fence(d, admin);
            exec(admin, "CREATE TABLE stock (item int PRIMARY KEY, qty int NOT NULL, last_token bigint NOT NULL)",
                    "INSERT INTO stock VALUES (1, 100, 0)");
            // Holder 5 checks and writes, and has not committed yet.
            f.check(old, "rl1:x:5:stock/1");
            deduct(old, 5);
            // Holder 6 checks meanwhile: it must wait for 5's transaction.
            CompletableFuture<Void> newer = CompletableFuture.runAsync(() -> {
                try {
                    fenced(neu, f, "rl1:x:6:stock/1", c -> deduct(c, 6));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            String waits = d == SqlFence.Dialect.POSTGRES
                    ? "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    : "SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'INSERT INTO raftlock_fence%'";
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (count(admin, waits) == 0) {
                assertTrue(System.nanoTime() < deadline, "no transaction waited for the fence row in 30 s");
                Thread.sleep(5);
            }
            assertTrue(!newer.isDone(), "the newer holder's check did not wait for the older transaction");
            old.commit();
            newer.get(30, TimeUnit.SECONDS);
            // Holder 5 again, after 6 committed: refused, nothing written.
            assertThrows(StaleSequencerException.class, () -> fenced(old, f, "rl1:x:5:stock/1", c -> deduct(c, 5)));
            assertEquals(98, count(admin, "SELECT qty FROM stock WHERE item = 1"));
            assertEquals(6, count(admin, "SELECT last_token FROM stock WHERE item = 1"));
        }
    }

    private static void deduct(Connection c, int token) throws SQLException {
        try (var ps = c.prepareStatement("UPDATE stock SET qty = qty - 1, last_token = ? WHERE item = 1")) {
            ps.setInt(1, token);
            ps.executeUpdate();
        }
    }

    /** Two names that differ in trailing spaces are two locks (a PAD SPACE collation folds them). */
    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void keepsNamesThatDifferInTrailingSpacesApart(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection c = connect(d)) {
            SqlFence f = fence(d, admin);
            String[][] steps = {
                {"rl1:x:10:a", "admit"}, {"rl1:x:5:a ", "admit"}, {"rl1:x:20:a ", "admit"},
                {"rl1:x:11:a", "admit"}, {"rl1:x:9:a", "stale"}, {"rl1:x:19:a ", "stale"},
            };
            for (String[] st : steps) {
                assertEquals(st[1], verdict(c, f, st[0]), "\"" + st[0] + "\"");
            }
            assertEquals(2, count(admin, "SELECT count(*) FROM " + SqlFence.DEFAULT_TABLE + " WHERE slot = -1"));
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void refusalNamesTheLaterTenuresToken(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection c = connect(d)) {
            SqlFence f = fence(d, admin);
            fenced(c, f, "rl1:p2/3:54:pool", null);
            fenced(c, f, "rl1:p0/1:68:pool", null);
            StaleSequencerException e =
                    assertThrows(StaleSequencerException.class, () -> fenced(c, f, "rl1:p2/3:54:pool", null));
            for (String want : new String[] {"54", "68", "kind or permits changed"}) {
                assertTrue(e.getMessage().contains(want), e.getMessage() + " lacks " + want);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void refusesWrongSchemasAndAdmitsNothing(SqlFence.Dialect d) throws Exception {
        String name = d == SqlFence.Dialect.POSTGRES ? "text" : "varchar(512)";
        String[][] cases = {
            {"fence_missing", null, "does not exist or has no primary key"},
            {"fence_nokey", "CREATE TABLE fence_nokey (lock_name " + name
                    + ", slot int, exclusive_token bigint, any_token bigint)", "does not exist or has no primary key"},
            {"fence_otherkey", "CREATE TABLE fence_otherkey (lock_name " + name
                    + " PRIMARY KEY, slot int, exclusive_token bigint, any_token bigint)", "has primary key (lock_name)"},
            {"fence_nocol", "CREATE TABLE fence_nocol (lock_name " + name
                    + ", slot int, exclusive_token bigint, PRIMARY KEY (lock_name, slot))", "any_token"},
            // a table of before the tenure columns
            {"fence_old", "CREATE TABLE fence_old (lock_name " + name
                    + ", slot int, exclusive_token bigint, any_token bigint, PRIMARY KEY (lock_name, slot))",
                "permits and other_token"},
        };
        try (Connection admin = admin(d); Connection c = connect(d)) {
            for (String[] k : cases) {
                if (k[1] != null) {
                    exec(admin, k[1]);
                }
                SqlFenceSchemaException e = assertThrows(SqlFenceSchemaException.class,
                        () -> fenced(c, new SqlFence(d, k[0]), "rl1:x:5:a", null), k[0]);
                assertTrue(e.getMessage().contains(k[2]), k[0] + ": " + e.getMessage());
                if (k[1] != null) {
                    assertEquals(0, count(admin, "SELECT count(*) FROM " + k[0]), k[0]);
                }
            }
            // A table dropped after it was verified is found too.
            SqlFence f = fence(d, admin);
            fenced(c, f, "rl1:x:5:a", null);
            exec(admin, "DROP TABLE " + SqlFence.DEFAULT_TABLE);
            assertThrows(SqlFenceSchemaException.class, () -> fenced(c, f, "rl1:x:6:a", null));
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void refusesMalformedInputAndAutoCommitAndChangesNothing(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection c = connect(d)) {
            SqlFence f = fence(d, admin);
            for (String bad : new String[] {"rl1:x:0:a", "rl1:x:18446744073709551616:a", "rl1:q:1:a", "rl1:x:1:"}) {
                assertThrows(MalformedSequencerException.class, () -> fenced(c, f, bad, null), bad);
            }
            c.setAutoCommit(true);
            SQLException e = assertThrows(SQLException.class, () -> f.check(c, "rl1:x:5:a"));
            assertTrue(e.getMessage().contains("autoCommit"), e.getMessage());
            c.setAutoCommit(false);
            assertEquals(0, count(admin, "SELECT count(*) FROM " + SqlFence.DEFAULT_TABLE));
            // The largest token round-trips through the table.
            fenced(c, f, "rl1:x:18446744073709551615:a", null);
            assertThrows(StaleSequencerException.class, () -> fenced(c, f, "rl1:x:18446744073709551614:a", null));
            assertEquals("admit", verdict(c, f, "rl1:s:18446744073709551615:a"));
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void neverAdmitsWhenTheDatabaseDropsTheConnection(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection c = connect(d)) {
            SqlFence f = fence(d, admin);
            fenced(c, f, "rl1:x:5:a", null);
            long me = count(c, d == SqlFence.Dialect.POSTGRES ? "SELECT pg_backend_pid()" : "SELECT CONNECTION_ID()");
            // The server ends the writer's connection (as a restart or a failover would).
            exec(admin, d == SqlFence.Dialect.POSTGRES ? "SELECT pg_terminate_backend(" + me + ")" : "KILL " + me);
            String gone = d == SqlFence.Dialect.POSTGRES
                    ? "SELECT count(*) FROM pg_stat_activity WHERE pid = " + me
                    : "SELECT count(*) FROM information_schema.processlist WHERE id = " + me;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (count(admin, gone) > 0) {
                assertTrue(System.nanoTime() < deadline, "the killed connection did not end in 30 s");
                Thread.sleep(5);
            }
            SQLException e = assertThrows(SQLException.class, () -> f.check(c, "rl1:x:6:a"));
            assertTrue(!(e instanceof SqlFenceSchemaException), e.toString());
            assertEquals(5, count(admin, "SELECT any_token FROM " + SqlFence.DEFAULT_TABLE));
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void committedTokensNeverGoBack(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d)) {
            SqlFence f = fence(d, admin);
            exec(admin, "CREATE TABLE writes (seq " + (d == SqlFence.Dialect.POSTGRES ? "bigserial" : "bigint AUTO_INCREMENT")
                    + " PRIMARY KEY, token bigint NOT NULL)");
            List<CompletableFuture<Void>> writers = new ArrayList<>();
            ExecutorService pool = Executors.newFixedThreadPool(6);
            for (int w = 0; w < 6; w++) {
                int id = w;
                writers.add(CompletableFuture.runAsync(() -> {
                    try (Connection c = connect(d)) {
                        for (int i = 0; i < 25; i++) {
                            int tok = 1 + (i * 6 + id) % 100;
                            try {
                                fenced(c, f, "rl1:x:" + tok + ":jobs/a", conn -> {
                                    try (PreparedStatement ps = conn.prepareStatement("INSERT INTO writes (token) VALUES (?)")) {
                                        ps.setInt(1, tok);
                                        ps.executeUpdate();
                                    }
                                });
                            } catch (StaleSequencerException e) {
                                // refused: nothing written
                            } catch (SQLException e) {
                                // a deadlock the database broke is no admission
                                if (!"40P01".equals(e.getSQLState()) && !"40001".equals(e.getSQLState())
                                        && e.getErrorCode() != 1213) {
                                    throw e;
                                }
                            }
                        }
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                }, pool));
            }
            try {
                CompletableFuture.allOf(writers.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
            } finally {
                pool.shutdownNow();
            }
            long prev = 0;
            int n = 0;
            try (Statement st = admin.createStatement(); ResultSet rs = st.executeQuery("SELECT token FROM writes ORDER BY seq")) {
                while (rs.next()) {
                    long tok = rs.getLong(1);
                    assertTrue(tok >= prev, "write with token " + tok + " committed after one with " + prev);
                    prev = tok;
                    n++;
                }
            }
            admin.commit();
            assertTrue(n > 0, "no write committed");
        }
    }

    // The README's example ("Fencing a database: SqlFence"), as it is there.
    private static SqlFence fence;

    static boolean deductStock(Connection conn, String sequencer) throws SQLException {
        conn.setAutoCommit(false);
        try {
            fence.check(conn, sequencer);          // first, in the same transaction
            try (PreparedStatement ps = conn.prepareStatement("UPDATE stock SET qty = qty - 1 WHERE item = 1")) {
                ps.executeUpdate();
            }
            conn.commit();
            return true;
        } catch (StaleSequencerException e) {
            conn.rollback();                       // a newer holder wrote: write nothing
            return false;
        } catch (SQLException | RuntimeException e) {
            conn.rollback();
            throw e;
        }
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void readmesExampleDeductsOncePerCurrentHolder(SqlFence.Dialect d) throws Exception {
        try (Connection admin = admin(d); Connection c = connect(d)) {
            fence = fence(d, admin);
            exec(admin, "CREATE TABLE stock (item int PRIMARY KEY, qty int NOT NULL)", "INSERT INTO stock VALUES (1, 10)");
            assertTrue(deductStock(c, "rl1:x:5:stock/1"));
            assertTrue(deductStock(c, "rl1:x:6:stock/1"));
            assertTrue(!deductStock(c, "rl1:x:5:stock/1"));
            assertEquals(8, count(admin, "SELECT qty FROM stock WHERE item = 1"));
        }
    }
}
