package raftnet

import (
	"strings"
	"testing"
)

// An advertised DNS name is kept as given (peers dial the name, and the
// Raft configuration names the node by it), not resolved to an IP; an IP
// is taken as it is; an unspecified IP or a missing port is refused.
func TestAdvertisedDNSNameIsKeptUnresolved(t *testing.T) {
	for _, c := range []struct{ adv, want, err string }{
		{"raftlock-0.raftlock-peers.default.svc:7101", "raftlock-0.raftlock-peers.default.svc:7101", ""},
		{"localhost:7101", "localhost:7101", ""},
		{"127.0.0.1:7101", "127.0.0.1:7101", ""},
		{"0.0.0.0:7101", "", "not dialable"},
		{"raftlock-0", "", "missing port"},
		{":7101", "", "no host"},
	} {
		rn, err := NewRaftTCPTransport(RaftTCPConfig{BindAddr: "127.0.0.1:0", Advertise: c.adv})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("advertise %q: %v, want an error with %q", c.adv, err, c.err)
			}
			if rn != nil {
				rn.Transport.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("advertise %q: %v", c.adv, err)
			continue
		}
		if got := string(rn.Transport.LocalAddr()); got != c.want {
			t.Errorf("advertise %q: LocalAddr %q, want %q", c.adv, got, c.want)
		}
		rn.Transport.Close()
	}
}
