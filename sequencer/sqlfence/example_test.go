package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/sequencer/sqlfence"
	"github.com/raftlock/raftlock/session"
)

// deductStock takes one item out of stock while holding the lock
// "stock/<item>": the fence check and the deduction are one transaction,
// so a holder that lost the lock (a long pause, a partition) and comes
// back after the next holder wrote cannot deduct twice. (docs/FENCING.md,
// "Stock deduction".)
func deductStock(ctx context.Context, db *sql.DB, fence *sqlfence.Fence, lock *session.Lock, item int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := fence.Check(ctx, tx, lock.Sequencer()); err != nil {
		if errors.Is(err, sequencer.ErrStale) {
			return fmt.Errorf("lost the lock before writing: %w", err)
		}
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE stock SET qty = qty - 1 WHERE item = $1 AND qty > 0`, item)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errors.New("out of stock")
	}
	return tx.Commit()
}

// The whole flow: a session, the item's lock, a fenced transaction. (Not
// run: it needs a cluster and a database.)
func Example_stockDeduction() {
	ctx := context.Background()
	var backend api.Backend // e.g. client.NewClient([]string{"10.0.0.1:7001", ...})
	var db *sql.DB          // e.g. sql.Open("postgres", dsn), with any driver
	fence, err := sqlfence.New(sqlfence.Postgres, "")
	if err != nil {
		panic(err)
	}
	// Once, at deploy time: db.ExecContext(ctx, fence.Schema())
	s, err := session.Open(ctx, backend)
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	lock, err := s.Lock(ctx, "stock/42")
	if err != nil {
		panic(err)
	}
	defer lock.Unlock(ctx)
	if err := deductStock(ctx, db, fence, lock, 42); err != nil {
		fmt.Println(err)
	}
}
