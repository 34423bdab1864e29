package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// heldFuture is a Raft future answered by the test.
type heldFuture chan error

func (f heldFuture) Error() error { return <-f }

// heldVerifier hands out one heldFuture per confirmation started, on calls.
type heldVerifier struct{ calls chan heldFuture }

func newHeldVerifier() *heldVerifier { return &heldVerifier{calls: make(chan heldFuture, 100)} }

func (v *heldVerifier) verify() raft.Future {
	f := make(heldFuture, 1)
	v.calls <- f
	return f
}

// next awaits the next confirmation started.
func (v *heldVerifier) next(t *testing.T) heldFuture {
	t.Helper()
	select {
	case f := <-v.calls:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no confirmation started")
		return nil
	}
}

// confirmAsync runs one confirm and returns its answer's channel.
func confirmAsync(ctx context.Context, c *keepAliveConfirmer, v *heldVerifier, stop chan struct{}) chan error {
	res := make(chan error, 1)
	go func() { res <- c.confirm(ctx, v.verify, stop) }()
	return res
}

func awaitResult(t *testing.T, res chan error) error {
	t.Helper()
	select {
	case err := <-res:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("confirm did not return")
		return nil
	}
}

func awaitPending(t *testing.T, c *keepAliveConfirmer, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d keepalives waiting for the next round", n), func() error {
		if got := c.pendingWaiters(); got != n {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

// A keepalive that arrives while a confirmation runs is not answered by
// it (it may have started before the keepalive arrived, when this node
// still led) but by the next one.
func TestKeepAliveIsConfirmedOnlyByAConfirmationStartedAfterItArrived(t *testing.T) {
	var c keepAliveConfirmer
	v, stop := newHeldVerifier(), make(chan struct{})
	first := confirmAsync(context.Background(), &c, v, stop)
	f1 := v.next(t)
	second := confirmAsync(context.Background(), &c, v, stop)
	awaitPending(t, &c, 1)
	f1 <- nil
	if err := awaitResult(t, first); err != nil {
		t.Fatalf("first keepalive: %v", err)
	}
	f2 := v.next(t) // the second round starts only now
	select {
	case err := <-second:
		t.Fatalf("second keepalive answered (%v) by a confirmation that started before it arrived", err)
	default:
	}
	f2 <- nil
	if err := awaitResult(t, second); err != nil {
		t.Fatalf("second keepalive: %v", err)
	}
}

// Keepalives that arrive while one confirmation runs share the next one:
// Raft sees one VerifyLeader for all of them.
func TestConcurrentKeepAlivesShareOneConfirmation(t *testing.T) {
	const n = 50
	var c keepAliveConfirmer
	v, stop := newHeldVerifier(), make(chan struct{})
	first := confirmAsync(context.Background(), &c, v, stop)
	f1 := v.next(t)
	var rest []chan error
	for range n {
		rest = append(rest, confirmAsync(context.Background(), &c, v, stop))
	}
	awaitPending(t, &c, n)
	f1 <- nil
	f2 := v.next(t)
	f2 <- nil
	for i, res := range append(rest, first) {
		if err := awaitResult(t, res); err != nil {
			t.Fatalf("keepalive %d: %v", i, err)
		}
	}
	if extra := len(v.calls); extra != 0 {
		t.Fatalf("%d more confirmations started for %d keepalives, want 2 in all", extra, n+1)
	}
}

// A confirmation that fails (this node no longer leads) fails every
// keepalive waiting for it, and the next keepalive starts a new one.
func TestFailedConfirmationFailsEveryKeepAliveOfItsRound(t *testing.T) {
	var c keepAliveConfirmer
	v, stop := newHeldVerifier(), make(chan struct{})
	first := confirmAsync(context.Background(), &c, v, stop)
	f1 := v.next(t)
	a := confirmAsync(context.Background(), &c, v, stop)
	b := confirmAsync(context.Background(), &c, v, stop)
	awaitPending(t, &c, 2)
	f1 <- nil
	v.next(t) <- raft.ErrNotLeader
	for _, res := range []chan error{a, b} {
		if err := awaitResult(t, res); !errors.Is(err, raft.ErrNotLeader) {
			t.Fatalf("keepalive of a failed round: %v, want ErrNotLeader", err)
		}
	}
	if err := awaitResult(t, first); err != nil {
		t.Fatalf("first keepalive: %v", err)
	}
	later := confirmAsync(context.Background(), &c, v, stop)
	v.next(t) <- nil
	if err := awaitResult(t, later); err != nil {
		t.Fatalf("keepalive after a failed round: %v", err)
	}
}

// A keepalive whose context ends stops waiting at once; the round goes on
// for the others; a node that stops ends every wait.
func TestKeepAliveConfirmationEndsWithItsContextOrTheNode(t *testing.T) {
	var c keepAliveConfirmer
	v, stop := newHeldVerifier(), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	mine := confirmAsync(ctx, &c, v, stop)
	f1 := v.next(t)
	other := confirmAsync(context.Background(), &c, v, stop)
	awaitPending(t, &c, 1)
	cancel()
	if err := awaitResult(t, mine); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled keepalive: %v, want context.Canceled", err)
	}
	f1 <- nil
	v.next(t) // the other's round, never answered by Raft
	close(stop)
	if err := awaitResult(t, other); !errors.Is(err, errShutdown) {
		t.Fatalf("keepalive on a stopped node: %v, want errShutdown", err)
	}
}
