package io.raftlock.client;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The SQL fence: fences writes to PostgreSQL or MySQL/MariaDB in the writer's
 * own JDBC transaction. Before its protected writes, a holder calls
 * {@link #check(Connection, Sequencer)} on the connection of its
 * transaction ({@code setAutoCommit(false)}); the check raises the lock's
 * marks in a fence table, or throws {@link StaleSequencerException} when a
 * newer grant's writer already came (or one of a later tenure of the name,
 * whose kind or permits differ), and the writer rolls back. The fence
 * row stays locked until the transaction ends, so a newer holder's check
 * waits for an older holder's commit: the check and the writes are one
 * critical section.
 *
 * <p>The rules are those of {@link Fence} (docs/DESIGN.md, "Sequencers"),
 * and the SQL is the Go package sequencer/sqlfence's, byte for byte
 * (testdata/sqlfence-statements.json). Only java.sql: the caller brings the
 * driver. Holds no connection; safe for concurrent use.
 */
public final class SqlFence {
    /** The SQL dialect of a database. */
    public enum Dialect {
        /** PostgreSQL 9.5 or later. */
        POSTGRES,
        /** MySQL or MariaDB with InnoDB. */
        MYSQL
    }

    /**
     * The statements a check runs, as the Go package prints them ({@code $n}
     * placeholders for PostgreSQL, {@code ?} for MySQL), for a service to copy.
     *
     * @param exclusive the exclusive sequencer's upsert
     * @param shared the shared sequencer's upsert
     * @param readBack the read of a lock's marks (MySQL's check reads its upsert back)
     */
    public record Statements(String exclusive, String shared, String readBack) {}

    /** The fence table's name unless the constructor is given another. */
    public static final String DEFAULT_TABLE = "raftlock_fence";

    /** The slot column's value for the lock itself (not a semaphore slot). */
    private static final int LOCK_LEVEL = -1;
    private static final Pattern IDENTIFIER =
            Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}(\\.[A-Za-z_][A-Za-z0-9_]{0,62})?");
    private static final Pattern DOLLAR = Pattern.compile("\\$([1-9])");
    /** SQLSTATEs of a missing table or column, or of an ON CONFLICT no unique key matches. */
    private static final Set<String> SCHEMA_STATES = Set.of("42P01", "42703", "42P10", "42S02", "42S22");
    /** MySQL's error numbers of a missing table or column. */
    private static final Set<Integer> SCHEMA_ERRNOS = Set.of(1146, 1054);

    private final Dialect dialect;
    private final String table;
    private final Statements statements;
    /** Set once the table was seen to have the right schema. */
    private volatile boolean verified;

    /** A fence for {@link #DEFAULT_TABLE} in a database of {@code dialect}. */
    public SqlFence(Dialect dialect) {
        this(dialect, DEFAULT_TABLE);
    }

    /**
     * A fence for {@code table} (an SQL identifier, optionally
     * {@code schema.table}; null or empty: {@link #DEFAULT_TABLE}) in a
     * database of {@code dialect}. The table must exist ({@link #schema()}).
     *
     * @throws IllegalArgumentException if the name is not an identifier
     */
    public SqlFence(Dialect dialect, String table) {
        if (dialect == null) {
            throw new IllegalArgumentException("sqlfence: no dialect");
        }
        if (table == null || table.isEmpty()) {
            table = DEFAULT_TABLE;
        }
        if (!IDENTIFIER.matcher(table).matches()) {
            throw new IllegalArgumentException("sqlfence: table name \"" + table
                    + "\": want an SQL identifier (letters, digits, _; optionally schema.table)");
        }
        this.dialect = dialect;
        this.table = table;
        String t = table;
        if (dialect == Dialect.POSTGRES) {
            // One statement each: the row is inserted or, if the lock has one,
            // updated only when the sequencer is current; RETURNING says which.
            statements = new Statements(
                    "INSERT INTO " + t + " AS f (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES ($1, $2, $3::numeric, $3::numeric, $4, 0)\n"
                            + "ON CONFLICT (lock_name, slot) DO UPDATE SET exclusive_token = EXCLUDED.exclusive_token, any_token = EXCLUDED.any_token,\n"
                            + "permits = CASE WHEN f.any_token < EXCLUDED.any_token THEN EXCLUDED.permits ELSE f.permits END,\n"
                            + "other_token = CASE WHEN f.any_token < EXCLUDED.any_token AND f.permits <> EXCLUDED.permits THEN f.any_token ELSE f.other_token END\n"
                            + "WHERE f.any_token <= EXCLUDED.any_token RETURNING f.any_token",
                    "INSERT INTO " + t + " AS f (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES ($1, $2, 0, $3::numeric, $4, 0)\n"
                            + "ON CONFLICT (lock_name, slot) DO UPDATE SET any_token = GREATEST(f.any_token, EXCLUDED.any_token),\n"
                            + "permits = CASE WHEN f.any_token < EXCLUDED.any_token THEN EXCLUDED.permits ELSE f.permits END,\n"
                            + "other_token = CASE WHEN f.any_token < EXCLUDED.any_token AND f.permits <> EXCLUDED.permits THEN f.any_token ELSE f.other_token END\n"
                            + "WHERE f.exclusive_token <= EXCLUDED.any_token\n"
                            + "AND CASE WHEN f.permits = EXCLUDED.permits THEN f.other_token ELSE f.any_token END <= EXCLUDED.any_token RETURNING f.any_token",
                    "SELECT exclusive_token, any_token, permits, other_token FROM " + t + " WHERE lock_name = $1 AND slot = $2");
        } else {
            // No conditional upsert in MySQL: the update keeps the old marks
            // unless the sequencer is current (assignments run left to right),
            // then the row (this transaction's own write, locked) is read back.
            statements = new Statements(
                    "INSERT INTO " + t + " (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES (?, ?, ?, ?, ?, 0)\n"
                            + "ON DUPLICATE KEY UPDATE other_token = IF(any_token < VALUES(any_token) AND permits <> VALUES(permits), any_token, other_token),\n"
                            + "permits = IF(any_token < VALUES(any_token), VALUES(permits), permits),\n"
                            + "any_token = IF(any_token <= VALUES(any_token), VALUES(any_token), any_token),\n"
                            + "exclusive_token = IF(any_token = VALUES(any_token), VALUES(exclusive_token), exclusive_token)",
                    "INSERT INTO " + t + " (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES (?, ?, 0, ?, ?, 0)\n"
                            + "ON DUPLICATE KEY UPDATE other_token = IF(any_token < VALUES(any_token) AND permits <> VALUES(permits), any_token, other_token),\n"
                            + "permits = IF(any_token < VALUES(any_token), VALUES(permits), permits),\n"
                            + "any_token = IF(exclusive_token <= VALUES(any_token) AND IF(permits = VALUES(permits), other_token, any_token) <= VALUES(any_token),\n"
                            + "GREATEST(any_token, VALUES(any_token)), any_token)",
                    "SELECT exclusive_token, any_token, permits, other_token FROM " + t + " WHERE lock_name = ? AND slot = ?");
        }
    }

    /** The fence table's name. */
    public String table() {
        return table;
    }

    /** The CREATE TABLE statement of the fence table. */
    public String schema() {
        String name = "text";
        String token = "NUMERIC(20)"; // unsigned 64-bit: PostgreSQL has no unsigned BIGINT
        if (dialect == Dialect.MYSQL) {
            // Bytes, compared as raftlock does: names that differ in case or
            // in trailing spaces are two locks (utf8mb4_bin pads spaces).
            name = "VARBINARY(512)";
            token = "BIGINT UNSIGNED";
        }
        return "CREATE TABLE IF NOT EXISTS " + table + " (\n"
                + "  lock_name       " + name + " NOT NULL,\n"
                + "  slot            INTEGER NOT NULL,\n"
                + "  exclusive_token " + token + " NOT NULL,\n"
                + "  any_token       " + token + " NOT NULL,\n"
                + "  permits         INTEGER NOT NULL,\n"
                + "  other_token     " + token + " NOT NULL,\n"
                + "  PRIMARY KEY (lock_name, slot)\n"
                + ")";
    }

    /** The statements a check runs, as the Go package prints them. */
    public Statements statements() {
        return statements;
    }

    /**
     * Parses {@code sequencer}, a sequencer's printable form, and checks it as
     * {@link #check(Connection, Sequencer)} does.
     *
     * @throws MalformedSequencerException if the text is not a canonical sequencer
     */
    public void check(Connection conn, String sequencer) throws SQLException, StaleSequencerException {
        if (sequencer == null) {
            throw new MalformedSequencerException("sqlfence: no sequencer");
        }
        check(conn, Sequencer.parse(sequencer));
    }

    /**
     * Admits {@code s} in the connection's transaction, raising its lock's
     * marks, or throws: {@link StaleSequencerException} (a newer grant's writer
     * came first), {@link MalformedSequencerException} (not a valid
     * sequencer), {@link SqlFenceSchemaException} (no fence table, or a wrong
     * one), or the driver's SQLException. On any of them the caller must roll
     * back and not write; on success it writes on the same connection and
     * commits. The lock's fence row stays locked until the transaction ends.
     *
     * <p>The connection must have {@code setAutoCommit(false)}: the check and
     * the writes must be one transaction; a connection in autoCommit mode is
     * refused with an SQLException before anything runs.
     */
    public void check(Connection conn, Sequencer s) throws SQLException, StaleSequencerException {
        if (s == null) {
            throw new MalformedSequencerException("sqlfence: no sequencer");
        }
        s.validate();
        if (conn == null) {
            throw new SQLException("sqlfence: no connection");
        }
        if (conn.getAutoCommit()) {
            throw new SQLException("sqlfence: the connection is in autoCommit mode; the check and the writes must share"
                    + " one transaction (setAutoCommit(false))");
        }
        verify(conn);
        boolean admitted;
        try {
            admitted = upsert(conn, s);
        } catch (SQLException e) {
            if (schemaError(e)) {
                verified = false;
                throw new SqlFenceSchemaException("sqlfence: check " + s + ": table " + table + ": " + e.getMessage()
                        + " (create it with SqlFence.schema())", e);
            }
            throw e;
        }
        if (!admitted) {
            throw refusal(conn, s);
        }
    }

    /**
     * The exception of a refused check of {@code s}: reads the lock's row
     * (locked by the refused upsert) to name the token that made s stale.
     */
    private StaleSequencerException refusal(Connection conn, Sequencer s) {
        long any;
        long other;
        int permits;
        try (PreparedStatement ps = prepare(conn, statements.readBack(), s.name(), LOCK_LEVEL);
                ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) {
                throw new SQLException("no lock row");
            }
            any = Long.parseUnsignedLong(rs.getString(2).trim());
            permits = rs.getInt(3);
            other = Long.parseUnsignedLong(rs.getString(4).trim());
        } catch (SQLException | RuntimeException e) {
            return new StaleSequencerException("sqlfence: " + s + ": the fence table " + table
                    + " has seen a newer grant of lock \"" + s.name() + "\"");
        }
        String tok = Long.toUnsignedString(s.token());
        if (permits != s.config() && Long.compareUnsigned(any, s.token()) > 0) {
            return new StaleSequencerException("sqlfence: " + s + ": token " + tok + " is lower than token "
                    + Long.toUnsignedString(any) + " in the fence table " + table
                    + ", granted after the name's kind or permits changed since the grant");
        }
        if (permits == s.config() && Long.compareUnsigned(other, s.token()) > 0) {
            return new StaleSequencerException("sqlfence: " + s + ": token " + tok + " is lower than token "
                    + Long.toUnsignedString(other) + " in the fence table " + table
                    + ", of another kind or permits: the name's kind or permits changed since the grant");
        }
        return new StaleSequencerException("sqlfence: " + s + ": the fence table " + table
                + " has seen a newer grant of lock \"" + s.name() + "\" (highest token " + Long.toUnsignedString(any)
                + ")");
    }

    private boolean upsert(Connection conn, Sequencer s) throws SQLException {
        if (s.isSlot()) {
            // A slot's grant: toward the lock as a reader (stale only below a
            // newer exclusive grant; it raises the lock's highest token),
            // within its slot as a writer (stale below any newer grant of
            // the slot). As Go's sqlfence.
            return upsertRow(conn, s, LOCK_LEVEL, true) && upsertRow(conn, s, s.slot(), false);
        }
        return upsertRow(conn, s, LOCK_LEVEL, s.mode() == Mode.SHARED);
    }

    private boolean upsertRow(Connection conn, Sequencer s, int slot, boolean shared) throws SQLException {
        BigDecimal tok = new BigDecimal(new BigInteger(Long.toUnsignedString(s.token())));
        int config = s.config();
        if (dialect == Dialect.POSTGRES) {
            try (PreparedStatement ps = prepare(conn, shared ? statements.shared() : statements.exclusive(),
                    s.name(), slot, tok, config);
                    ResultSet rs = ps.executeQuery()) {
                return rs.next();
            }
        }
        String q = shared ? statements.shared() : statements.exclusive();
        Object[] args = shared ? new Object[] {s.name(), slot, tok, config}
                : new Object[] {s.name(), slot, tok, tok, config};
        try (PreparedStatement ps = prepare(conn, q, args)) {
            ps.executeUpdate();
        }
        String excl;
        String any;
        String other;
        int permits;
        try (PreparedStatement ps = prepare(conn, statements.readBack(), s.name(), slot);
                ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) {
                throw new SQLException("sqlfence: check " + s + ": the fence row vanished after its upsert");
            }
            excl = rs.getString(1);
            any = rs.getString(2);
            permits = rs.getInt(3);
            other = rs.getString(4);
        }
        long e = Long.parseUnsignedLong(excl.trim());
        long a = Long.parseUnsignedLong(any.trim());
        long o = Long.parseUnsignedLong(other.trim());
        if (shared) {
            // The tenure rule: below another config's highest token.
            long below = permits == config ? o : a;
            return Long.compareUnsigned(e, s.token()) <= 0 && Long.compareUnsigned(below, s.token()) <= 0;
        }
        return e == s.token() && a == s.token();
    }

    /**
     * Checks, once (again after a schema error), that the table has the
     * columns of {@link #schema()} and the primary key (lock_name, slot):
     * without that key MySQL would add a row per check instead of raising
     * one, and the fence would admit everything.
     */
    private void verify(Connection conn) throws SQLException {
        if (verified) {
            return;
        }
        int dot = table.indexOf('.');
        String schema = dot >= 0 ? table.substring(0, dot) : "";
        String name = dot >= 0 ? table.substring(dot + 1) : table;
        String q;
        Object[] args;
        String probe;
        if (dialect == Dialect.POSTGRES) {
            q = "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)\n"
                    + "WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)";
            args = new Object[] {table};
            probe = "SELECT lock_name, slot, exclusive_token, any_token, permits, other_token FROM " + table
                    + " WHERE false";
        } else {
            q = "SELECT column_name FROM information_schema.key_column_usage\n"
                    + "WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? "
                    + "AND constraint_name = 'PRIMARY' ORDER BY ordinal_position";
            args = new Object[] {schema, name};
            probe = "SELECT lock_name, slot, exclusive_token, any_token, permits, other_token FROM " + table
                    + " WHERE 1 = 0";
        }
        List<String> key = new ArrayList<>();
        try (PreparedStatement ps = prepare(conn, q, args); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                key.add(rs.getString(1).toLowerCase(Locale.ROOT));
            }
        }
        if (!key.equals(List.of("lock_name", "slot"))) {
            if (key.isEmpty()) {
                throw new SqlFenceSchemaException("sqlfence: table " + table
                        + " does not exist or has no primary key (create it with SqlFence.schema())");
            }
            throw new SqlFenceSchemaException("sqlfence: table " + table + " has primary key (" + String.join(", ", key)
                    + "), want (lock_name, slot) (see SqlFence.schema())");
        }
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(probe)) {
            while (rs.next()) {
                // no rows
            }
        } catch (SQLException e) {
            if (schemaError(e)) {
                throw new SqlFenceSchemaException("sqlfence: table " + table + ": " + e.getMessage()
                        + " (see SqlFence.schema(); a table without the permits and other_token columns:"
                        + " docs/FENCING.md says how to add them)", e);
            }
            throw e;
        }
        verified = true;
    }

    /**
     * Prepares {@code sql}, written with {@code $n} or {@code ?} placeholders,
     * as JDBC's {@code ?}, and binds {@code args} ({@code $n} is the n-th).
     */
    private static PreparedStatement prepare(Connection conn, String sql, Object... args) throws SQLException {
        List<Object> bound = new ArrayList<>();
        String text = sql;
        if (sql.contains("$")) {
            Matcher m = DOLLAR.matcher(sql);
            StringBuilder sb = new StringBuilder();
            while (m.find()) {
                bound.add(args[Integer.parseInt(m.group(1)) - 1]);
                m.appendReplacement(sb, "?");
            }
            m.appendTail(sb);
            text = sb.toString();
        } else {
            bound.addAll(List.of(args));
        }
        PreparedStatement ps = conn.prepareStatement(text);
        try {
            for (int i = 0; i < bound.size(); i++) {
                Object v = bound.get(i);
                if (v instanceof Integer n) {
                    ps.setInt(i + 1, n);
                } else if (v instanceof BigDecimal d) {
                    ps.setBigDecimal(i + 1, d);
                } else {
                    ps.setString(i + 1, (String) v);
                }
            }
        } catch (SQLException | RuntimeException e) {
            ps.close();
            throw e;
        }
        return ps;
    }

    /**
     * Whether {@code e} (or one chained to it) is the database saying the table
     * or a column does not exist, or that no unique key matches ON CONFLICT.
     */
    private static boolean schemaError(SQLException e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException se) {
                if ((se.getSQLState() != null && SCHEMA_STATES.contains(se.getSQLState()))
                        || SCHEMA_ERRNOS.contains(se.getErrorCode())) {
                    return true;
                }
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }
}
