package session

import (
	"context"
	"fmt"
	"time"
)

// A session holds a lock and passes its sequencer to the resource it
// protects; Lost tells it when to stop.
func ExampleSession_Lock() {
	ctx := context.Background()
	var b Backend = newFakeBackend(RealClock()) // transport.Client or node.Node in real code
	s, err := Open(ctx, b, TTL(30*time.Second), Name("worker-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)

	l, err := s.Lock(ctx, "jobs/nightly", Value("worker-1:8080"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Sequencer(), s.State())

	_, err = s.TryLock(ctx, "jobs/nightly")
	fmt.Println(CodeOf(err))

	select {
	case <-l.Lost():
		fmt.Println("lost: stop using the resource")
	default:
	}
	if err := l.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	_, lost := <-l.Lost()
	fmt.Println("lost after unlock:", !lost)
	// Output:
	// rl1:x:1:jobs/nightly safe
	// lock_busy
	// lost after unlock: true
}
