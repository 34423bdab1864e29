// Package sqlfence fences writes to a SQL database in the writer's own
// transaction: before its protected writes, a holder runs Check with its
// lock's sequencer in the same transaction; Check raises the lock's marks
// in a fence table, or fails with an error wrapping sequencer.ErrStale when
// a newer grant's writer already came, and the writer rolls back. The
// fence row stays locked until the transaction ends, so a newer holder's
// transaction waits for an older one's commit and then sees its mark: the
// check and the writes are one critical section, which no proxy or
// in-process fence can give to a shared database.
//
// The rules are sequencer.Fence's (docs/DESIGN.md, "Sequencers"): an
// exclusive sequencer is admitted unless a newer grant of any mode was
// seen; a shared one unless a newer exclusive grant was seen; a semaphore
// slot's unless a newer grant of the same slot or a newer exclusive grant
// of the lock was seen; and any unless a newer grant of another kind or
// permits (a later tenure of the name) was seen. The fence table holds,
// per lock (slot -1) and per semaphore slot, the highest exclusive token,
// the highest token of any mode, the Config of that token (permits: 0 for
// a plain lock) and the highest token of another Config:
//
//	CREATE TABLE raftlock_fence (
//	  lock_name       VARBINARY(512) NOT NULL,  -- text in PostgreSQL
//	  slot            INTEGER        NOT NULL,  -- -1: the lock itself
//	  exclusive_token NUMERIC(20)    NOT NULL,  -- BIGINT UNSIGNED in MySQL
//	  any_token       NUMERIC(20)    NOT NULL,
//	  permits         INTEGER        NOT NULL,
//	  other_token     NUMERIC(20)    NOT NULL,
//	  PRIMARY KEY (lock_name, slot))
//
// The statements are short enough to copy into a service in any language
// (Fence.Statements prints them; docs/FENCING.md shows them with Java and
// Python). Works with database/sql and any driver of PostgreSQL or
// MySQL/MariaDB; the package imports no driver.
package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/raftlock/raftlock/sequencer"
)

// Dialect is the SQL dialect of a database.
type Dialect int

const (
	// Postgres is PostgreSQL (9.5 or later: INSERT ... ON CONFLICT).
	Postgres Dialect = iota + 1
	// MySQL is MySQL or MariaDB with InnoDB.
	MySQL
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	default:
		return fmt.Sprintf("dialect(%d)", int(d))
	}
}

// DefaultTable is the fence table's name unless New is given another.
const DefaultTable = "raftlock_fence"

// ErrSchema is wrapped by the error of a check against a fence table that
// does not exist or does not have the columns and primary key of Schema.
var ErrSchema = errors.New("fence table missing or wrong")

// lockLevel is the slot column's value for the lock itself (not a
// semaphore slot).
const lockLevel = -1

// Fence checks sequencers against one fence table of one database. It
// holds no connection; it is safe for concurrent use.
type Fence struct {
	dialect Dialect
	table   string
	// verified is set once the table was seen to have the right schema.
	verified atomic.Bool
	// The statements, with the table's name in them.
	exclusive, shared, read string
}

// identifier is a table name New accepts: an SQL identifier, optionally
// qualified by a schema (or database) name.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// New returns a fence for table (DefaultTable if empty) in a database of
// dialect d. The table must exist (Schema).
func New(d Dialect, table string) (*Fence, error) {
	if table == "" {
		table = DefaultTable
	}
	if !identifier.MatchString(table) {
		return nil, fmt.Errorf("sqlfence: table name %q: want an SQL identifier (letters, digits, _; optionally schema.table)", table)
	}
	f := &Fence{dialect: d, table: table}
	switch d {
	case Postgres:
		// One statement each: the row is inserted or, if the lock has one,
		// updated only when the sequencer is current; RETURNING says which.
		// A row that exists is locked either way until the transaction ends.
		f.exclusive = `INSERT INTO ` + table + ` AS f (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES ($1, $2, $3::numeric, $3::numeric, $4, 0)
ON CONFLICT (lock_name, slot) DO UPDATE SET exclusive_token = EXCLUDED.exclusive_token, any_token = EXCLUDED.any_token,
permits = CASE WHEN f.any_token < EXCLUDED.any_token THEN EXCLUDED.permits ELSE f.permits END,
other_token = CASE WHEN f.any_token < EXCLUDED.any_token AND f.permits <> EXCLUDED.permits THEN f.any_token ELSE f.other_token END
WHERE f.any_token <= EXCLUDED.any_token RETURNING f.any_token`
		f.shared = `INSERT INTO ` + table + ` AS f (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES ($1, $2, 0, $3::numeric, $4, 0)
ON CONFLICT (lock_name, slot) DO UPDATE SET any_token = GREATEST(f.any_token, EXCLUDED.any_token),
permits = CASE WHEN f.any_token < EXCLUDED.any_token THEN EXCLUDED.permits ELSE f.permits END,
other_token = CASE WHEN f.any_token < EXCLUDED.any_token AND f.permits <> EXCLUDED.permits THEN f.any_token ELSE f.other_token END
WHERE f.exclusive_token <= EXCLUDED.any_token
AND CASE WHEN f.permits = EXCLUDED.permits THEN f.other_token ELSE f.any_token END <= EXCLUDED.any_token RETURNING f.any_token`
		f.read = `SELECT exclusive_token, any_token, permits, other_token FROM ` + table + ` WHERE lock_name = $1 AND slot = $2`
	case MySQL:
		// MySQL has no conditional upsert: the update keeps the old marks
		// unless the sequencer is current (assignments run left to right,
		// so each sees the columns assigned before it), then the caller
		// reads the row back (its own write, locked) to learn which. The
		// tenure marks change only below a higher token, which is current
		// whenever the permits differ.
		f.exclusive = `INSERT INTO ` + table + ` (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES (?, ?, ?, ?, ?, 0)
ON DUPLICATE KEY UPDATE other_token = IF(any_token < VALUES(any_token) AND permits <> VALUES(permits), any_token, other_token),
permits = IF(any_token < VALUES(any_token), VALUES(permits), permits),
any_token = IF(any_token <= VALUES(any_token), VALUES(any_token), any_token),
exclusive_token = IF(any_token = VALUES(any_token), VALUES(exclusive_token), exclusive_token)`
		f.shared = `INSERT INTO ` + table + ` (lock_name, slot, exclusive_token, any_token, permits, other_token) VALUES (?, ?, 0, ?, ?, 0)
ON DUPLICATE KEY UPDATE other_token = IF(any_token < VALUES(any_token) AND permits <> VALUES(permits), any_token, other_token),
permits = IF(any_token < VALUES(any_token), VALUES(permits), permits),
any_token = IF(exclusive_token <= VALUES(any_token) AND IF(permits = VALUES(permits), other_token, any_token) <= VALUES(any_token),
GREATEST(any_token, VALUES(any_token)), any_token)`
		f.read = `SELECT exclusive_token, any_token, permits, other_token FROM ` + table + ` WHERE lock_name = ? AND slot = ?`
	default:
		return nil, fmt.Errorf("sqlfence: unknown dialect %v", d)
	}
	return f, nil
}

// Schema returns the CREATE TABLE statement of the fence table.
func (f *Fence) Schema() string {
	// Tokens are unsigned 64-bit integers: NUMERIC(20) in PostgreSQL,
	// which has no unsigned BIGINT.
	name, token := "text", "NUMERIC(20)"
	if f.dialect == MySQL {
		// 512 bytes of UTF-8 lock name, compared as bytes, as raftlock
		// does: names differing in case or in trailing spaces are two
		// locks. (utf8mb4_bin is a PAD SPACE collation: it folds "a"
		// and "a " into one row.)
		name, token = "VARBINARY(512)", "BIGINT UNSIGNED"
	}
	return `CREATE TABLE IF NOT EXISTS ` + f.table + ` (
  lock_name       ` + name + ` NOT NULL,
  slot            INTEGER NOT NULL,
  exclusive_token ` + token + ` NOT NULL,
  any_token       ` + token + ` NOT NULL,
  permits         INTEGER NOT NULL,
  other_token     ` + token + ` NOT NULL,
  PRIMARY KEY (lock_name, slot)
)`
}

// Statements returns the statements Check runs, for a service that is not
// written in Go to copy: the exclusive and the shared upsert, and (MySQL)
// the read-back.
func (f *Fence) Statements() (exclusive, shared, readBack string) {
	return f.exclusive, f.shared, f.read
}

// Check admits s in tx, raising its lock's marks, or returns an error and
// changes nothing the caller keeps: an error wrapping sequencer.ErrStale
// (a newer grant's writer came first), sequencer.ErrMalformed (s is not a
// valid sequencer), ErrSchema (no fence table, or a wrong one), or the
// database's error. On any error the caller must roll tx back and must not
// write; on success it writes in tx and commits. Check locks the lock's
// fence row until tx ends.
func (f *Fence) Check(ctx context.Context, tx *sql.Tx, s sequencer.Sequencer) error {
	if tx == nil {
		return errors.New("sqlfence: check: no transaction (the check and the writes must share one)")
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("sqlfence: check: %w", err)
	}
	if err := f.verify(ctx, tx); err != nil {
		return err
	}
	var admitted bool
	var err error
	if s.Semaphore {
		// A slot's grant: toward the lock as a reader (stale only below
		// a newer exclusive grant; it raises the lock's highest token, so
		// that an older exclusive holder is stale), within its slot as a
		// writer (stale below any newer grant of the slot).
		admitted, err = f.upsert(ctx, tx, s, lockLevel, true)
		if err == nil && admitted {
			admitted, err = f.upsert(ctx, tx, s, int(s.Slot), false)
		}
	} else {
		admitted, err = f.upsert(ctx, tx, s, lockLevel, s.Mode == sequencer.Shared)
	}
	if err != nil {
		return f.wrap(s, err)
	}
	if !admitted {
		return f.refusal(ctx, tx, s)
	}
	return nil
}

// refusal is the error of a refused check of s: it reads the lock's row
// (locked by the refused upsert) to name the token that made s stale.
func (f *Fence) refusal(ctx context.Context, tx *sql.Tx, s sequencer.Sequencer) error {
	var exclText, anyText, otherText string
	var permits uint64
	err := tx.QueryRowContext(ctx, f.read, s.Name, lockLevel).Scan(&exclText, &anyText, &permits, &otherText)
	any, err1 := strconv.ParseUint(anyText, 10, 64)
	other, err2 := strconv.ParseUint(otherText, 10, 64)
	tok := uint64(s.Token)
	switch {
	case errors.Join(err, err1, err2) != nil:
		return fmt.Errorf("sqlfence: %w: %v: the fence table %s has seen a newer grant of lock %q", sequencer.ErrStale, s, f.table, s.Name)
	case permits != s.Config() && any > tok:
		return fmt.Errorf("sqlfence: %w: %v: token %d is lower than token %d in the fence table %s, granted after the name's kind or permits changed since the grant", sequencer.ErrStale, s, tok, any, f.table)
	case permits == s.Config() && other > tok:
		return fmt.Errorf("sqlfence: %w: %v: token %d is lower than token %d in the fence table %s, of another kind or permits: the name's kind or permits changed since the grant", sequencer.ErrStale, s, tok, other, f.table)
	}
	return fmt.Errorf("sqlfence: %w: %v: the fence table %s has seen a newer grant of lock %q (highest token %d)", sequencer.ErrStale, s, f.table, s.Name, any)
}

// CheckString parses text, a sequencer's printable form, and checks it as
// Check does.
func (f *Fence) CheckString(ctx context.Context, tx *sql.Tx, text string) error {
	s, err := sequencer.Parse(text)
	if err != nil {
		return fmt.Errorf("sqlfence: check: %w", err)
	}
	return f.Check(ctx, tx, s)
}

// upsert runs the statement of a shared or an exclusive grant of s's token
// and Config for the row (s.Name, slot) and reports whether the grant was
// admitted.
func (f *Fence) upsert(ctx context.Context, tx *sql.Tx, s sequencer.Sequencer, slot int, shared bool) (bool, error) {
	// Tokens travel as decimal text: database/sql's drivers refuse a
	// uint64 above the int64 range.
	tok := strconv.FormatUint(uint64(s.Token), 10)
	config := int(s.Config())
	if f.dialect == Postgres {
		q := f.exclusive
		if shared {
			q = f.shared
		}
		var any string
		err := tx.QueryRowContext(ctx, q, s.Name, slot, tok, config).Scan(&any)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	var err error
	if shared {
		_, err = tx.ExecContext(ctx, f.shared, s.Name, slot, tok, config)
	} else {
		_, err = tx.ExecContext(ctx, f.exclusive, s.Name, slot, tok, tok, config)
	}
	if err != nil {
		return false, err
	}
	var exclText, anyText, otherText string
	var permits int
	if err := tx.QueryRowContext(ctx, f.read, s.Name, slot).Scan(&exclText, &anyText, &permits, &otherText); err != nil {
		return false, err
	}
	excl, err1 := strconv.ParseUint(exclText, 10, 64)
	any, err2 := strconv.ParseUint(anyText, 10, 64)
	other, err3 := strconv.ParseUint(otherText, 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return false, fmt.Errorf("read back the marks: %w", err)
	}
	t := uint64(s.Token)
	if shared {
		below := any // the tenure rule: another Config's highest token
		if permits == config {
			below = other
		}
		return excl <= t && below <= t, nil
	}
	return excl == t && any == t, nil
}

// wrap names the check and, for an error that says the table is missing or
// has other columns, ErrSchema.
func (f *Fence) wrap(s sequencer.Sequencer, err error) error {
	if schemaError(err) {
		f.verified.Store(false)
		return fmt.Errorf("sqlfence: check %v: %w: table %s: %v (create it with Fence.Schema)", s, ErrSchema, f.table, err)
	}
	return fmt.Errorf("sqlfence: check %v: %w", s, err)
}

// schemaError reports whether err is the database saying the table or a
// column does not exist, or (PostgreSQL) that no unique key matches ON
// CONFLICT.
func schemaError(err error) bool {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		switch st.SQLState() {
		case "42P01", "42703", "42P10", "42S02", "42S22":
			return true
		}
	}
	msg := err.Error()
	for _, m := range []string{"Error 1146", "Error 1054", "42P01", "42703", "42P10"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// verify checks, once per Fence (again after a schema error), that the
// table has the columns of Schema and the primary key (lock_name, slot):
// without that key MySQL would add a row per check instead of raising one,
// and the fence would admit everything.
func (f *Fence) verify(ctx context.Context, tx *sql.Tx) error {
	if f.verified.Load() {
		return nil
	}
	schema, table := "", f.table
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	var q string
	var args []any
	switch f.dialect {
	case Postgres:
		q = `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)`
		args = []any{f.table}
	case MySQL:
		q = `SELECT column_name FROM information_schema.key_column_usage
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND constraint_name = 'PRIMARY' ORDER BY ordinal_position`
		args = []any{schema, table}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlfence: verify table %s: %w", f.table, err)
	}
	var key []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return fmt.Errorf("sqlfence: verify table %s: %w", f.table, err)
		}
		key = append(key, strings.ToLower(c))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlfence: verify table %s: %w", f.table, err)
	}
	if strings.Join(key, ",") != "lock_name,slot" {
		if len(key) == 0 {
			return fmt.Errorf("sqlfence: %w: table %s does not exist or has no primary key (create it with Fence.Schema)", ErrSchema, f.table)
		}
		return fmt.Errorf("sqlfence: %w: table %s has primary key (%s), want (lock_name, slot) (see Fence.Schema)", ErrSchema, f.table, strings.Join(key, ", "))
	}
	var probe string
	if f.dialect == Postgres {
		probe = `SELECT lock_name, slot, exclusive_token, any_token, permits, other_token FROM ` + f.table + ` WHERE false`
	} else {
		probe = `SELECT lock_name, slot, exclusive_token, any_token, permits, other_token FROM ` + f.table + ` WHERE 1 = 0`
	}
	r, err := tx.QueryContext(ctx, probe)
	if err != nil {
		return fmt.Errorf("sqlfence: %w: table %s: %v (see Fence.Schema; a table without the permits and other_token columns: docs/FENCING.md says how to add them)", ErrSchema, f.table, err)
	}
	r.Close()
	f.verified.Store(true)
	return nil
}
