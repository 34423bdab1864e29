package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	// The PostgreSQL driver of the checker's database resource.
	_ "github.com/lib/pq"

	"github.com/raftlock/raftlock/sequencer/sqlfence"
)

// pgResource is a real PostgreSQL database as the protected resource: each
// write is a transaction that runs the SQL fence's check
// (sequencer/sqlfence) and inserts a row into checker_writes, as a service
// fencing its writes would. It is accepted if the transaction commits.
// Unfenced (TESTING THE CHECKER) skips the check: the writer that trusts
// its lock alone, which the fencing check must catch.
type pgResource struct {
	db        *sql.DB
	fence     *sqlfence.Fence
	unfenced  bool
	opTimeout time.Duration
}

// newPGResource connects to dsn and lays out an empty fence table and
// checker_writes (dropping those of an earlier run).
func newPGResource(ctx context.Context, dsn string, unfenced bool) (*pgResource, error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("resource database: %w", err)
	}
	db.SetMaxOpenConns(64)
	f, err := sqlfence.New(sqlfence.Postgres, "")
	if err != nil {
		db.Close()
		return nil, err
	}
	for _, q := range []string{
		`DROP TABLE IF EXISTS checker_writes`,
		`DROP TABLE IF EXISTS ` + sqlfence.DefaultTable,
		f.Schema(),
		`CREATE TABLE checker_writes (id bigserial PRIMARY KEY, lock_name text NOT NULL, token numeric(20) NOT NULL, client int NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("resource database: %s: %w", q, err)
		}
	}
	return &pgResource{db: db, fence: f, unfenced: unfenced, opTimeout: 10 * time.Second}, nil
}

// write runs one fenced transaction for client's write m. The moment
// stamped is taken just before the commit, with the fence row locked, so
// accepted writes of one lock are stamped in the order they commit.
func (r *pgResource) write(client int, m message) WriteRec {
	w := WriteRec{Client: client, Lock: m.Lock, Session: m.Session, Holder: m.Holder, Token: m.Token}
	ctx, cancel := context.WithTimeout(context.Background(), r.opTimeout)
	defer cancel()
	fail := func(err error) WriteRec {
		w.At, w.Err = monoNow(), err.Error()
		return w
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback() // a no-op after Commit
	if !r.unfenced {
		if err := r.fence.CheckString(ctx, tx, m.Seq); err != nil {
			return fail(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO checker_writes (lock_name, token, client) VALUES ($1, $2, $3)`,
		m.Lock, strconv.FormatUint(m.Token, 10), client); err != nil {
		return fail(err)
	}
	w.At = monoNow()
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	w.Accepted = true
	return w
}

// finish checks the database's own record: the writes it holds, in the
// order they were inserted (for one lock, the order they committed, since
// the fence row serialises them), carry non-decreasing tokens per lock,
// and they are as many as the writes accepted.
func (r *pgResource) finish(accepted int) []Violation {
	defer r.db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var vs []Violation
	bad := func(what string) {
		vs = append(vs, Violation{Check: checkFencing, Client: -1, What: "database: " + what})
	}
	rows, err := r.db.QueryContext(ctx, `SELECT lock_name, token::text, client FROM checker_writes ORDER BY id`)
	if err != nil {
		bad(fmt.Sprintf("cannot read back the writes: %v", err))
		return vs
	}
	defer rows.Close()
	last, n := map[string]uint64{}, 0
	for rows.Next() {
		var lock, text string
		var client int
		if err := rows.Scan(&lock, &text, &client); err != nil {
			bad(fmt.Sprintf("cannot read back the writes: %v", err))
			return vs
		}
		tok, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			bad(fmt.Sprintf("token %q: %v", text, err))
			return vs
		}
		if p, ok := last[lock]; ok && tok < p {
			bad(fmt.Sprintf("lock %s: client %d's write with token %d committed after one with token %d", lock, client, tok, p))
		}
		last[lock] = max(last[lock], tok)
		n++
	}
	if err := rows.Err(); err != nil {
		bad(fmt.Sprintf("cannot read back the writes: %v", err))
	}
	if n != accepted {
		bad(fmt.Sprintf("it holds %d writes, the run accepted %d", n, accepted))
	}
	return vs
}
