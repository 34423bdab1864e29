package main

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// pingXid is the xid of ZooKeeper's ping request and response.
const pingXid = -2

// pingObserver is told about a connection's pings: sent when the client
// wrote a ping request, acked (with the send time of the oldest ping not
// yet answered) when a ping response arrived.
type pingObserver interface {
	pingSent(at time.Time)
	pingAcked(sent, at time.Time)
}

// pingConn wraps the client's connection to a server and spots pings in
// ZooKeeper's framing, which the client library handles without telling:
// every packet is a 4-byte big-endian length and a body whose first 4
// bytes are the xid (-2 for pings). The library writes each request with
// one Write, so a ping is a Write of exactly 12 bytes with xid -2; reads
// may split packets anywhere, so the read side follows the framing byte by
// byte. The connect response (the first packet) has no xid header: its
// body starts with the protocol version, 0, never -2.
type pingConn struct {
	net.Conn
	obs pingObserver

	mu      sync.Mutex
	pending []time.Time // send times of unanswered pings

	// Read side state (only the reading goroutine touches it).
	hdr    [8]byte // length, then xid
	hdrN   int     // bytes of hdr filled
	remain int     // body bytes left after the xid
}

func (c *pingConn) Write(b []byte) (int, error) {
	if len(b) == 12 && int32(binary.BigEndian.Uint32(b[4:8])) == pingXid {
		now := time.Now()
		c.mu.Lock()
		c.pending = append(c.pending, now)
		c.mu.Unlock()
		c.obs.pingSent(now)
	}
	return c.Conn.Write(b)
}

func (c *pingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.scan(b[:n])
	return n, err
}

// scan follows the packet framing over the bytes read.
func (c *pingConn) scan(b []byte) {
	for len(b) > 0 {
		if c.remain > 0 {
			k := min(c.remain, len(b))
			c.remain -= k
			b = b[k:]
			continue
		}
		want := 8
		if c.hdrN < 4 {
			want = 4 // the length first: the body may be shorter than an xid
		}
		k := copy(c.hdr[c.hdrN:want], b)
		c.hdrN += k
		b = b[k:]
		if c.hdrN == 4 && binary.BigEndian.Uint32(c.hdr[:4]) < 4 {
			// A body too short to hold an xid: skip it.
			c.remain, c.hdrN = int(binary.BigEndian.Uint32(c.hdr[:4])), 0
			continue
		}
		if c.hdrN < 8 {
			continue
		}
		length := int(binary.BigEndian.Uint32(c.hdr[:4]))
		xid := int32(binary.BigEndian.Uint32(c.hdr[4:8]))
		c.remain, c.hdrN = length-4, 0
		if xid == pingXid {
			c.acked()
		}
	}
}

func (c *pingConn) acked() {
	now := time.Now()
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	sent := c.pending[0]
	c.pending = c.pending[1:]
	c.mu.Unlock()
	c.obs.pingAcked(sent, now)
}
