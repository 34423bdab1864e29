package sequencer_test

import (
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/sequencer"
)

// A storage service protected by a lock keeps a Fence and checks the
// sequencer that comes with every write. A client that held the lock, paused
// (say, a long GC) and lost it cannot overwrite the work of the lock's next
// holder: its older token is rejected.
func ExampleFence() {
	fence := sequencer.NewFence()

	write := func(seq string) {
		if err := fence.CheckString(seq); err != nil {
			if errors.Is(err, sequencer.ErrStale) {
				fmt.Println("rejected:", err)
				return
			}
			fmt.Println("bad request:", err)
			return
		}
		fmt.Println("accepted", seq)
	}

	write("rl1:x:41:jobs/leader") // the first holder writes
	write("rl1:x:41:jobs/leader") // and writes again with the same grant
	write("rl1:x:57:jobs/leader") // the lock moves on to a new holder
	write("rl1:x:41:jobs/leader") // the old holder wakes up, too late
	write("rl1:x:0:jobs/leader")  // not a sequencer at all
	fmt.Println("highest:", fence.Highest("jobs/leader"))

	// Output:
	// accepted rl1:x:41:jobs/leader
	// accepted rl1:x:41:jobs/leader
	// accepted rl1:x:57:jobs/leader
	// rejected: stale sequencer: lock "jobs/leader": token 41 is lower than the highest seen, 57
	// bad request: fence check: malformed sequencer: "rl1:x:0:jobs/leader": token must be a positive decimal integer
	// highest: 57
}

// Readers holding a shared lock at the same time all pass the fence, in any
// order; once a writer's exclusive grant is seen, the readers' older grants
// are stale.
func ExampleFence_shared() {
	fence := sequencer.NewFence()
	for _, seq := range []string{
		"rl1:s:10:cfg", // two readers share the lock
		"rl1:s:12:cfg",
		"rl1:s:10:cfg", // the older reader still holds it
		"rl1:x:15:cfg", // a writer takes the lock after both left
		"rl1:s:12:cfg", // a reader that missed it
	} {
		if err := fence.CheckString(seq); err != nil {
			fmt.Println("rejected:", err)
			continue
		}
		fmt.Println("accepted", seq)
	}

	// Output:
	// accepted rl1:s:10:cfg
	// accepted rl1:s:12:cfg
	// accepted rl1:s:10:cfg
	// accepted rl1:x:15:cfg
	// rejected: stale sequencer: lock "cfg": shared token 12 is lower than the highest exclusive token seen, 15
}
