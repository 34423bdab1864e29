package acceptwait

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestOnlyAClosedListenerEndsTheLoop: running out of descriptors, an
// aborted connection and any other accept error are retried, with a
// growing delay that never passes Max; net.ErrClosed (wrapped or not)
// ends the loop.
func TestOnlyAClosedListenerEndsTheLoop(t *testing.T) {
	var b Backoff
	for _, err := range []error{
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)},
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENFILE)},
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)},
		fmt.Errorf("something else"),
	} {
		if _, again := b.Retry(err); !again {
			t.Errorf("%v ended the accept loop", err)
		}
	}
	if _, again := b.Retry(fmt.Errorf("accept: %w", net.ErrClosed)); again {
		t.Error("a closed listener did not end the loop")
	}
	b.delay = Max
	if d, _ := b.Retry(syscall.EMFILE); d != Max {
		t.Errorf("delay %v after the longest, want %v", d, Max)
	}
	b.Reset()
	if d, _ := b.Retry(syscall.EMFILE); d > 10*time.Millisecond {
		t.Errorf("delay %v after a reset, want the shortest", d)
	}
}
