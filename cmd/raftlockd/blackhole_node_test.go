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
//   - "port": every packet of the node's HTTP port dropped, the leader then
//     a follower. Followers forward to the leader's peer port (its Raft
//     port), so a leader whose HTTP port nobody reaches still serves every
//     request its clients send through the followers.
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
		grayNodeCostsNoSessionOrLock(t, c, grayFault{name: "black-hole", start: cut, end: heal}, "leader", "follower")
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
