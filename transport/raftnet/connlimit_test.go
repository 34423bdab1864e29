package raftnet

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/raftlock/raftlock/api"
)

// TestConnsPerIPCapRefusesPastTheCapAndFreesOnClose pins the per-IP cap:
// past it a connection is closed at once, an exempt IP is never refused,
// and a closed connection gives its slot back.
func TestConnsPerIPCapRefusesPastTheCapAndFreesOnClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := newIPLimiter(api.MinMaxConnsPerIP, hclog.NewNullLogger())
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- lim.admit(c)
		}
	}()
	defer ln.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var kept []net.Conn
	for range api.MinMaxConnsPerIP {
		dial()
		sc := <-accepted
		if sc == nil {
			t.Fatalf("refused below the cap (%d kept)", len(kept))
		}
		kept = append(kept, sc)
	}
	dial()
	if sc := <-accepted; sc != nil {
		t.Fatal("a connection past the cap was admitted")
	}
	kept[0].Close()
	dial()
	if sc := <-accepted; sc == nil {
		t.Fatal("a closed connection's slot was not given back")
	} else {
		kept[0] = sc
	}
	member := func(ip netip.Addr) bool { return ip.IsLoopback() }
	lim.exempt.Store(&member)
	dial()
	if sc := <-accepted; sc == nil {
		t.Fatal("an exempt IP was refused")
	}
}

// flakyListener fails its first accepts with EMFILE, then accepts for
// real.
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestLimitedListenerRetriesAcceptsThatFail pins issue 40 item 1 for the
// API and stream ports (every one is a LimitConnsPerIP listener): out of
// file descriptors, Accept waits and accepts again instead of returning
// the error to the server above, which would stop the daemon; a closed
// listener still ends it.
func TestLimitedListenerRetriesAcceptsThatFail(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConnsPerIP(&flakyListener{Listener: ln, fails: 3}, 0, hclog.NewNullLogger())
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := lim.Accept()
	if err != nil {
		t.Fatalf("Accept after EMFILE: %v, want the connection", err)
	}
	sc.Close()
	lim.Close()
	if _, err := lim.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}
