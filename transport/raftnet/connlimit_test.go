package raftnet

import (
	"net"
	"net/netip"
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
