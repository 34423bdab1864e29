package session

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
)

// A session holds a lock and passes its sequencer to the resource it
// protects; Lost tells it when to stop.
func ExampleSession_Lock() {
	ctx := context.Background()
	var b api.Backend = apitest.New() // client.Client or node.Node in real code
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

	// Not re-entrant: the session holds it already, so it fails at once.
	_, err = s.TryLock(ctx, "jobs/nightly")
	fmt.Println(api.CodeOf(err))

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
	// rl1:x:2:jobs/nightly safe
	// already_held
	// lost after unlock: true
}

// Leader election: campaign with your address, act as leader while the
// leadership is not Lost, fence your writes with its sequencer, resign when
// done. Others find the leader with Leader or follow it with Observe.
func ExampleSession_Campaign() {
	ctx := context.Background()
	var b api.Backend = apitest.New() // client.Client or node.Node.Backend() in real code
	s, err := Open(ctx, b, TTL(15*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)

	lead, err := s.Campaign(ctx, "election/scheduler", "10.0.0.7:9000") // blocks until elected
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("elected with", lead.Sequencer())

	cur, err := CurrentLeader(ctx, b, "election/scheduler")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader:", cur.Value, cur.Token())

	if err := lead.Resign(ctx); err != nil {
		fmt.Println(err)
	}
	_, err = CurrentLeader(ctx, b, "election/scheduler")
	fmt.Println(err)
	// Output:
	// elected with rl1:x:2:election/scheduler
	// leader: 10.0.0.7:9000 2
	// leader of election/scheduler: election has no leader
}
