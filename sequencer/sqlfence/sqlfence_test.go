package sqlfence_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/lib/pq"

	"github.com/raftlock/raftlock/internal/dbtest"
	"github.com/raftlock/raftlock/internal/freeport"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/sequencer/sqlfence"
)

// engine is a real database server of one dialect, started for a test.
type engine struct {
	name    string
	dialect sqlfence.Dialect
	start   func(t *testing.T) *sql.DB
	// q rewrites a statement written with $n placeholders for the engine.
	q func(string) string
	// lockWaits counts the transactions waiting for a row lock.
	lockWaits string
	// serial is the type of an auto-increment key column.
	serial string
	// stop and restart the server (a database that goes down).
	stop, restart func() error
}

func reserve(t *testing.T) func() int {
	return func() int {
		r, err := freeport.Reserve("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r.Port
	}
}

// engines are PostgreSQL and MariaDB: each test runs on both.
func engines() []*engine {
	pg := &engine{name: "postgres", dialect: sqlfence.Postgres, q: func(s string) string { return s },
		lockWaits: `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`, serial: "bigserial"}
	pg.start = func(t *testing.T) *sql.DB {
		p := dbtest.StartPostgres(t, reserve(t))
		pg.stop, pg.restart = p.Stop, p.Start
		return open(t, "postgres", p.DSN)
	}
	my := &engine{name: "mariadb", dialect: sqlfence.MySQL, q: func(s string) string {
		for i := 9; i >= 1; i-- {
			s = strings.ReplaceAll(s, "$"+string(rune('0'+i)), "?")
		}
		return s
	}, lockWaits: `SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'INSERT INTO raftlock_fence%'`,
		serial: "bigint AUTO_INCREMENT"}
	my.start = func(t *testing.T) *sql.DB {
		m := dbtest.StartMariaDB(t, reserve(t))
		return open(t, "mysql", m.DSN)
	}
	return []*engine{pg, my}
}

func open(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// each runs test on every engine, as a subtest.
func each(t *testing.T, test func(t *testing.T, e *engine, db *sql.DB)) {
	if testing.Short() {
		t.Skip("starts database servers")
	}
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) { test(t, e, e.start(t)) })
	}
}

func newFence(t *testing.T, e *engine, db *sql.DB, table string) *sqlfence.Fence {
	t.Helper()
	f, err := sqlfence.New(e.dialect, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(f.Schema()); err != nil {
		t.Fatal(err)
	}
	return f
}

// check runs one fenced transaction: Check, then (if admitted) the write,
// then commit; on any error it rolls back.
func check(ctx context.Context, db *sql.DB, f *sqlfence.Fence, seq string, write func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f.CheckString(ctx, tx, seq); err != nil {
		tx.Rollback()
		return err
	}
	if write != nil {
		if err := write(tx); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func verdict(err error) string {
	switch {
	case err == nil:
		return "admit"
	case errors.Is(err, sequencer.ErrStale):
		return "stale"
	case errors.Is(err, sequencer.ErrMalformed):
		return "malformed"
	default:
		return "error: " + err.Error()
	}
}

// The SQL fence gives every shared fence vector's verdicts (the same file
// the Go, Python and Java fences pass), each step in a transaction of its
// own against a real PostgreSQL and a real MariaDB.
func TestSQLFenceGivesTheSharedVectorsVerdicts(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/fence-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs struct {
		Vectors []struct {
			Name  string
			Steps []struct{ Sequencer, Verdict string }
		}
	}
	if err := json.Unmarshal(raw, &vs); err != nil || len(vs.Vectors) == 0 {
		t.Fatalf("fence-vectors.json: %v", err)
	}
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		f := newFence(t, e, db, "")
		ctx := context.Background()
		for _, v := range vs.Vectors {
			if _, err := db.Exec("DELETE FROM " + sqlfence.DefaultTable); err != nil {
				t.Fatal(err)
			}
			for i, st := range v.Steps {
				if got := verdict(check(ctx, db, f, st.Sequencer, nil)); got != st.Verdict {
					t.Errorf("%s, step %d (%q): verdict %s, want %s", v.Name, i, st.Sequencer, got, st.Verdict)
				}
			}
		}
	})
}

// A paused holder of slot 2 of a semaphore of 3, checked after the name
// was taken again as a semaphore of 1, is refused, and the error names
// both tokens and the change of kind or permits.
func TestSQLFenceRefusalNamesTheLaterTenuresToken(t *testing.T) {
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		f := newFence(t, e, db, "")
		ctx := context.Background()
		for _, seq := range []string{"rl1:p2/3:54:pool", "rl1:p0/1:68:pool"} {
			if err := check(ctx, db, f, seq, nil); err != nil {
				t.Fatalf("%s: %v", seq, err)
			}
		}
		err := check(ctx, db, f, "rl1:p2/3:54:pool", nil)
		if !errors.Is(err, sequencer.ErrStale) {
			t.Fatalf("the paused holder: %v, want stale", err)
		}
		for _, want := range []string{"54", "68", "kind or permits changed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
}

// Two lock names that differ only in trailing spaces are two locks, as
// raftlock has them: each has its own fence rows, and a grant of one never
// makes the other's holder stale (a PAD SPACE collation folded them).
func TestSQLFenceKeepsNamesThatDifferInTrailingSpacesApart(t *testing.T) {
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		f := newFence(t, e, db, "")
		ctx := context.Background()
		for _, c := range []struct{ seq, want string }{
			{"rl1:x:10:a", "admit"},
			{"rl1:x:5:a ", "admit"}, // another lock: not below "a"'s 10
			{"rl1:p0/2:3:a  ", "admit"},
			{"rl1:x:20:a ", "admit"},
			{"rl1:x:11:a", "admit"}, // "a" is not below "a "'s 20
			{"rl1:x:9:a", "stale"},
			{"rl1:x:19:a ", "stale"},
			{"rl1:p1/2:4:a  ", "admit"},
		} {
			if got := verdict(check(ctx, db, f, c.seq, nil)); got != c.want {
				t.Errorf("%q: %s, want %s", c.seq, got, c.want)
			}
		}
		var rows int
		if err := db.QueryRow(`SELECT count(*) FROM raftlock_fence WHERE slot = -1`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 3 {
			t.Errorf("%d lock rows, want 3 (\"a\", \"a \", \"a  \")", rows)
		}
	})
}

// The migration of docs/FENCING.md turns a MySQL table made with the
// utf8mb4_bin DDL (PAD SPACE: "a" and "a " share a row) into one that
// keeps them apart, and the copy it describes keeps what the folded row
// refused refused for the other name.
func TestSQLFenceMigrationSplitsNamesFoldedByAPadSpaceCollation(t *testing.T) {
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		if e.dialect != sqlfence.MySQL {
			t.Skip("PostgreSQL's text never folded trailing spaces")
		}
		ctx := context.Background()
		if _, err := db.Exec(`CREATE TABLE raftlock_fence (
  lock_name       VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  slot            INTEGER NOT NULL,
  exclusive_token BIGINT UNSIGNED NOT NULL,
  any_token       BIGINT UNSIGNED NOT NULL,
  permits         INTEGER NOT NULL,
  other_token     BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (lock_name, slot)
)`); err != nil {
			t.Fatal(err)
		}
		f, err := sqlfence.New(sqlfence.MySQL, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := verdict(check(ctx, db, f, "rl1:x:10:a", nil)); got != "admit" {
			t.Fatalf("before: %s", got)
		}
		if got := verdict(check(ctx, db, f, "rl1:x:5:a ", nil)); got != "stale" {
			t.Fatalf("before the migration \"a \" shares \"a\"'s row: %s, want stale", got)
		}
		for _, q := range []string{
			`ALTER TABLE raftlock_fence MODIFY lock_name VARBINARY(512) NOT NULL`,
			`INSERT IGNORE INTO raftlock_fence (lock_name, slot, exclusive_token, any_token, permits, other_token)
SELECT 'a ', slot, exclusive_token, any_token, permits, other_token FROM raftlock_fence WHERE lock_name = 'a'`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		for _, c := range []struct{ seq, want string }{
			{"rl1:x:5:a ", "stale"}, // refused before, refused after
			{"rl1:x:12:a ", "admit"},
			{"rl1:x:11:a", "admit"}, // "a" no longer shares "a "'s 12
			{"rl1:x:10:a", "stale"},
		} {
			if got := verdict(check(ctx, db, f, c.seq, nil)); got != c.want {
				t.Errorf("after the migration %q: %s, want %s", c.seq, got, c.want)
			}
		}
	})
}

// The fence row is locked until the writer's transaction ends: a newer
// holder's check waits for the older holder's commit, and then its writes
// come after the older one's; an older holder that comes after a newer
// one's commit is refused and its write never lands.
func TestSQLFenceOrdersWritesOfOldAndNewHolders(t *testing.T) {
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		f := newFence(t, e, db, "")
		ctx := context.Background()
		if _, err := db.Exec(`CREATE TABLE stock (item int PRIMARY KEY, qty int NOT NULL, last_token bigint NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO stock VALUES (1, 100, 0)`); err != nil {
			t.Fatal(err)
		}
		deduct := func(tok int) func(*sql.Tx) error {
			return func(tx *sql.Tx) error {
				_, err := tx.Exec(e.q(`UPDATE stock SET qty = qty - 1, last_token = $1 WHERE item = 1`), tok)
				return err
			}
		}
		// Holder 5 checks and writes, and has not committed yet.
		old, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.CheckString(ctx, old, "rl1:x:5:stock/1"); err != nil {
			t.Fatal(err)
		}
		if err := deduct(5)(old); err != nil {
			t.Fatal(err)
		}
		// Holder 6 checks meanwhile: it must wait for 5's transaction.
		done := make(chan error, 1)
		go func() { done <- check(ctx, db, f, "rl1:x:6:stock/1", deduct(6)) }()
		waitForLockWait(t, e, db)
		select {
		case err := <-done:
			t.Fatalf("the newer holder's check did not wait for the older transaction: %v", err)
		default:
		}
		if err := old.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("newer holder after the older commit: %v", err)
		}
		// Holder 5 again, after 6 committed: refused, nothing written.
		if err := check(ctx, db, f, "rl1:x:5:stock/1", deduct(5)); !errors.Is(err, sequencer.ErrStale) {
			t.Fatalf("former holder: %v, want stale", err)
		}
		var qty, last int
		if err := db.QueryRow(`SELECT qty, last_token FROM stock WHERE item = 1`).Scan(&qty, &last); err != nil {
			t.Fatal(err)
		}
		if qty != 98 || last != 6 {
			t.Fatalf("stock %d, last token %d; want 98 and 6", qty, last)
		}
	})
}

// waitForLockWait waits until some transaction of db waits for a row lock.
func waitForLockWait(t *testing.T, e *engine, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(e.lockWaits).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no transaction waited for the fence row in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Many holders racing each other's transactions with tokens in no order:
// every write that commits carries a token at least as high as every
// write committed before it.
func TestSQLFenceCommittedTokensNeverGoBack(t *testing.T) {
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		f := newFence(t, e, db, "")
		ctx := context.Background()
		if _, err := db.Exec(`CREATE TABLE writes (seq ` + e.serial + ` PRIMARY KEY, token bigint NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					tok := 1 + (i*8+w)%200
					seq := sequencer.Sequencer{Name: "jobs/a", Mode: sequencer.Exclusive, Token: sequencer.Token(tok)}
					err := check(ctx, db, f, seq.String(), func(tx *sql.Tx) error {
						_, err := tx.Exec(e.q(`INSERT INTO writes (token) VALUES ($1)`), tok)
						return err
					})
					if err != nil && !errors.Is(err, sequencer.ErrStale) && !deadlock(err) {
						t.Error(err)
					}
				}
			}(w)
		}
		wg.Wait()
		rows, err := db.Query(`SELECT token FROM writes ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		prev, n := int64(0), 0
		for rows.Next() {
			var tok int64
			if err := rows.Scan(&tok); err != nil {
				t.Fatal(err)
			}
			if tok < prev {
				t.Fatalf("write with token %d committed after one with %d", tok, prev)
			}
			prev, n = tok, n+1
		}
		if n == 0 {
			t.Fatal("no write committed")
		}
		t.Logf("%d of 320 writes committed, tokens never going back", n)
	})
}

// deadlock reports whether err is the database ending a transaction to
// break a deadlock (the writer retries or gives up; nothing was admitted).
func deadlock(err error) bool {
	return strings.Contains(err.Error(), "Deadlock found") || strings.Contains(err.Error(), "40P01")
}

// A missing table, a table without the primary key (lock_name, slot), one
// with another key or without a column, a malformed sequencer and a
// database that is down each give a clear error, and nothing is admitted.
func TestSQLFenceRefusesBadInputWrongSchemaAndADownDatabase(t *testing.T) {
	each(t, func(t *testing.T, e *engine, db *sql.DB) {
		ctx := context.Background()
		name := "text"
		if e.dialect == sqlfence.MySQL {
			name = "varchar(512)"
		}
		for _, c := range []struct {
			name, table, ddl, want string
		}{
			{"missing", "fence_missing", "", "does not exist or has no primary key"},
			{"no key", "fence_nokey", "CREATE TABLE fence_nokey (lock_name " + name + ", slot int, exclusive_token bigint, any_token bigint)", "does not exist or has no primary key"},
			{"other key", "fence_otherkey", "CREATE TABLE fence_otherkey (lock_name " + name + " PRIMARY KEY, slot int, exclusive_token bigint, any_token bigint)", "has primary key (lock_name)"},
			{"no column", "fence_nocol", "CREATE TABLE fence_nocol (lock_name " + name + ", slot int, exclusive_token bigint, PRIMARY KEY (lock_name, slot))", "any_token"},
			// A table of before the tenure columns: refused, pointing to the migration.
			{"no tenure columns", "fence_old", "CREATE TABLE fence_old (lock_name " + name + ", slot int, exclusive_token bigint, any_token bigint, PRIMARY KEY (lock_name, slot))", "permits and other_token"},
		} {
			if c.ddl != "" {
				if _, err := db.Exec(c.ddl); err != nil {
					t.Fatal(err)
				}
			}
			f, err := sqlfence.New(e.dialect, c.table)
			if err != nil {
				t.Fatal(err)
			}
			err = check(ctx, db, f, "rl1:x:5:a", nil)
			if !errors.Is(err, sqlfence.ErrSchema) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want ErrSchema saying %q", c.name, err, c.want)
			}
		}
		f := newFence(t, e, db, "")
		if err := check(ctx, db, f, "rl1:x:0:a", nil); !errors.Is(err, sequencer.ErrMalformed) {
			t.Errorf("malformed: %v", err)
		}
		for _, bad := range []string{"a;drop table x", "1abc", "a.b.c", strings.Repeat("a", 64)} {
			if _, err := sqlfence.New(e.dialect, bad); err == nil {
				t.Errorf("table name %q accepted", bad)
			}
		}
		if e.restart == nil {
			return
		}
		// The database goes down in the middle of a transaction.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.stop(); err != nil {
			t.Fatal(err)
		}
		if err := f.CheckString(ctx, tx, "rl1:x:7:a"); err == nil {
			t.Fatal("a check against a stopped database admitted")
		}
		tx.Rollback()
		if err := check(ctx, db, f, "rl1:x:7:a", nil); err == nil {
			t.Fatal("a check against a stopped database admitted")
		}
		if err := e.restart(); err != nil {
			t.Fatal(err)
		}
		if err := check(ctx, db, f, "rl1:x:7:a", nil); err != nil {
			t.Fatalf("after the database came back: %v", err)
		}
	})
}
