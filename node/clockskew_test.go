package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// clockSkew is how far the skewed node's wall clock runs ahead.
const clockSkew = 30 * time.Second

// transferLeadership moves leadership to node to (an index into the
// cluster) with Raft's leadership transfer and waits until it serves.
func transferLeadership(t *testing.T, c *testCluster, to int) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("n%d leads", to+1), func() error {
		nodes := c.snapshotNodes()
		target := nodes[to]
		if target.IsLeader() {
			return nil
		}
		if target.raft.State() == raft.Leader {
			return errors.New("leads, not serving yet")
		}
		for _, n := range nodes {
			if n == nil || n == target || n.raft.State() != raft.Leader {
				continue
			}
			f := n.raft.LeadershipTransferToServer(raft.ServerID(target.ID()), raft.ServerAddress(target.RaftAddr()))
			if err := f.Error(); err != nil {
				return fmt.Errorf("transfer from %s: %w", n.ID(), err)
			}
			return errors.New("transferred, not serving yet")
		}
		return errors.New("no leader to transfer from")
	})
}

// A new leader whose wall clock runs ahead of the clock that stamped a
// lock-delay does not shorten it: it restarts the delay for its full length
// on its own monotonic clock, so the lock stays unavailable for at least the
// lock-delay after the skewed node starts leading.
func TestNewLeaderWithClockAheadKeepsFullLockDelay(t *testing.T) {
	const ttl, lockDelay = time.Second, 10 * time.Second
	const skewed = 2 // n3
	// The skewed node's clock runs ahead from just before it is made the
	// leader: had it led first (the first election is anyone's), the
	// entries it proposed (member records) would have moved the replicated
	// clock ahead already, and the delay would not be stamped by a correct
	// clock, the case this test is about.
	var skewOn atomic.Bool
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg) // leadership moves only by the test's transfers
		if cfg.ID == fmt.Sprintf("n%d", skewed+1) {
			cfg.Now = func() time.Time {
				if skewOn.Load() {
					return time.Now().Add(clockSkew)
				}
				return time.Now()
			}
		}
	})
	// The delay is started, and stamped, by a leader with a correct clock.
	transferLeadership(t, c, 0)
	probe := mustOpen(t, c, api.OpenRequest{TTL: 30 * time.Second})
	stopKA := c.keepAlive(probe.ID, 300*time.Millisecond)
	defer stopKA()
	dying := mustOpen(t, c, api.OpenRequest{TTL: ttl, LockDelay: lockDelay})
	g := mustAcquire(t, c, api.AcquireRequest{Name: "skew/lock", Session: dying.ID, Holder: "h"})
	until := awaitLockDelay(t, c, "skew/lock")
	nodes := c.snapshotNodes()
	if st := nodes[skewed].raft.State(); st == raft.Leader {
		t.Fatalf("precondition: the skewed node leads already (%v)", st)
	}
	if limit := time.Now().Add(lockDelay + clockSkew/2); !until.Before(limit) {
		t.Fatalf("precondition: the delay (until %v) was stamped by the skewed clock", until)
	}

	// The skewed node cannot lead before this moment.
	skewOn.Store(true)
	promoted := time.Now()
	transferLeadership(t, c, skewed)
	t.Logf("n%d leads %v after the transfer started; the delay was stamped to end at %v, %v from then on the correct clock",
		skewed+1, time.Since(promoted), until, time.Until(until))

	try := api.AcquireRequest{Name: "skew/lock", Session: probe.ID, Holder: "probe"}
	var got api.Grant
	for {
		err := c.do(func(n *Node) (err error) { got, err = n.Acquire(ctxT(t), try); return })
		if err == nil {
			break
		}
		if !errors.Is(err, api.ErrLockBusy) {
			t.Fatalf("try-acquire during the lock-delay: %v, want lock_busy", err)
		}
		if time.Since(promoted) > lockDelay+30*time.Second {
			t.Fatalf("lock still delayed %v after the promotion: the delay never ended", time.Since(promoted))
		}
		time.Sleep(50 * time.Millisecond) // poll
	}
	el := time.Since(promoted)
	if el < lockDelay {
		t.Fatalf("lock granted %v after the skewed node (clock %v ahead) started leading, before its lock-delay %v",
			el, clockSkew, lockDelay)
	}
	t.Logf("lock granted %v after the promotion", el)
	if got.Token <= g.Token {
		t.Fatalf("token %d after the delay, want > %d", got.Token, g.Token)
	}
}

// loadFSMFixture returns a state machine restored from one of the fsm
// package's snapshot fixtures.
func loadFSMFixture(t *testing.T, name string) *fsm.FSM {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "fsm", name))
	if err != nil {
		t.Fatal(err)
	}
	f := fsm.New(nil)
	if err := f.Load(bytes.TrimSuffix(data, []byte("\n"))); err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return f
}

// A new leader restarts every lock-delay it takes over for its full
// recorded length, under the name (lock, DelayUntil) its EndDelay must
// carry; a delay whose length is unknown (state written before lengths
// were replicated, as in the old snapshot fixture) waits
// api.MaxLockDelay, the longest lock-delay there is: never shorter.
func TestDelayOfUnknownLengthIsRestartedForTheCap(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    time.Duration
	}{
		{"snapshot-v1-without-delay-for.json", api.MaxLockDelay},
		{"snapshot-v1.json", 10 * time.Second}, // recorded: the sessions' lock-delay
	} {
		f := loadFSMFixture(t, tc.fixture)
		want := map[delayKey]time.Duration{}
		for _, l := range f.Locks("") {
			if l.Delayed {
				want[delayKey{l.Name, l.DelayUntil, 0}] = tc.want
			}
		}
		if len(want) == 0 {
			t.Fatalf("%s: no delayed lock", tc.fixture)
		}
		got := map[delayKey]time.Duration{}
		for _, r := range delaysToRestart(f.Locks("")) {
			got[r.key] = r.d
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: delays restarted %v, want %v", tc.fixture, got, want)
		}
	}
	// A recorded length is restarted as recorded; a lock without a delay
	// is not timed at all.
	got := delaysToRestart([]fsm.Lock{
		{Name: "short", Delayed: true, DelayUntil: 5, DelayFor: int64(time.Second)},
		{Name: "old", Delayed: true, DelayUntil: 7},
		{Name: "held", Holders: []fsm.Holder{{Session: "s", Holder: "h", Token: 3}}},
	})
	want := []restartedDelay{{delayKey{"short", 5, 0}, time.Second}, {delayKey{"old", 7, 0}, api.MaxLockDelay}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delays restarted %v, want %v", got, want)
	}
}
