package main

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// TestBlackholedNodeCostsNoSessionOrLock pins the gray-failure rules for a
// node that keeps running (Raft traffic flows, so a leader stays leader)
// while packets to and from its HTTP port are dropped (iptables DROP, no
// RST, both ways): the scenario of TestFrozenNodeCostsNoSessionOrLock.
//
//   - "port": every packet of the node's HTTP port dropped, the followers'
//     forwarded requests included. For a follower the rules hold. For the
//     leader they cannot, and that case is skipped: no request reaches the
//     leader (followers forward to it over HTTP, and those requests hang
//     until the client's attempt deadline), so no keepalive is served and
//     every session expires after its ttl.
//   - "clients": only the packets between the node's HTTP port and the
//     clients' address (127.0.0.2) dropped, the leader then a follower: a
//     node its clients cannot reach while its peers can.
func TestBlackholedNodeCostsNoSessionOrLock(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs raftlockd processes and iptables")
	}
	fw := proccluster.RequireFirewall(t)
	c := proccluster.Start(t, proccluster.BuildDaemon(t), 3)
	heal := func(int) { fw.Heal() }
	t.Run("port", func(t *testing.T) {
		cut := func(i int) { fw.DropPort(c.Nodes[i].HTTPPort()) }
		grayNodeCostsNoSessionOrLock(t, c, grayFault{name: "black-hole", start: cut, end: heal}, "follower")
		t.Run("leader", func(t *testing.T) {
			t.Skip("KNOWN GAP (issue 13): with the leader's HTTP port black-holed both ways no request reaches it " +
				"(followers forward over HTTP and hang until the client's attempt deadline), so every session " +
				"expires after its ttl: 'lock lost during the black-hole of the leader (session expired, events [jeopardy])'")
		})
	})
	t.Run("clients", func(t *testing.T) {
		const clientIP = "127.0.0.2"
		cut := func(i int) { fw.DropPortFor(c.Nodes[i].HTTPPort(), clientIP) }
		grayNodeCostsNoSessionOrLock(t, c, grayFault{name: "client-black-hole", start: cut, end: heal, hc: httpClientFrom(t, clientIP)},
			"leader", "follower")
	})
}

// httpClientFrom returns an HTTP client whose connections come from the
// loopback address ip, configured like the transport's default one.
func httpClientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		ExpectContinueTimeout: time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
