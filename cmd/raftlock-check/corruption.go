package main

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/damage"
)

// corruptRefuseTimeout bounds how long a damaged follower may take to
// refuse to start.
const corruptRefuseTimeout = 30 * time.Second

// corruptFollower damages a stopped follower's log (random bytes over its
// newest log entry: with the boltdb log store, every copy bbolt keeps in
// raft.db; with wal, the newest entry of its newest WAL segment before
// the segment's last append batch, whose CRC raft-wal checks and whose
// damage it takes for a torn write) and restarts it: the node
// must refuse to start. Then it is repaired as docs/DAMAGED.md says:
// removed from the cluster, wiped, and brought back with --join. A node
// that started on the damage, served a state of its own, or crashed
// instead of refusing would show in the checks or the note.
func (in *injector) corruptFollower(ctx context.Context) (FaultRec, error) {
	_, f, err := in.leaderAndFollower(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	rec := FaultRec{Kind: faultCorruptFollower, Target: f.id, Start: monoNow()}
	in.cl.stop(f, 5*time.Second)
	if err := damageNewestLog(f.dataDir, in.rng); err != nil {
		in.restart(f)
		return FaultRec{}, fmt.Errorf("%w: %v", errSkipped, err)
	}
	in.restart(f)
	f.mu.Lock()
	exited := f.exited
	f.mu.Unlock()
	select {
	case <-exited:
		rec.Note = "(refused to start)"
		f.take() // reaped already
	case <-time.After(corruptRefuseTimeout):
		rec.Note = fmt.Sprintf("(STILL RUNS %v after the damage)", corruptRefuseTimeout)
		in.cl.kill(f)
	case <-ctx.Done():
		in.cl.kill(f)
	}
	// The repair runs to its end even if the run ends meanwhile: the
	// damaged node would otherwise stay down for the final checks.
	rctx, cancel := waitCtx(2 * joinTimeout)
	defer cancel()
	if err := in.removeAndWipe(rctx, f); err != nil {
		rec.Note += fmt.Sprintf(", not removed: %v", err)
	} else if err := in.cl.bringIn(rctx, f); err != nil {
		rec.Note += fmt.Sprintf(", not back: %v", err)
	} else {
		rec.Note += ", repaired with --join"
	}
	rec.End = monoNow()
	return rec, nil
}

// damageNewestLog damages the newest log entry of the stopped node's
// data dir, in the log store it uses.
func damageNewestLog(dataDir string, rng *rand.Rand) error {
	if seg := damage.LogFile(dataDir); filepath.Base(seg) != "raft.db" {
		return damage.NewestSettledCommandInWAL(seg, 32, rng)
	}
	return damage.NewestCommandInFile(filepath.Join(dataDir, "raft.db"), 32, rng)
}
