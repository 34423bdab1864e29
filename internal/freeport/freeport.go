// Package freeport hands tests and the fault checker TCP ports on loopback
// for processes they start later, without the race of "listen on :0,
// close, pass the port on": there, between the close and the child's own
// listen, the kernel may give the port to anyone else — most often as the
// local port of an outgoing connection, since bind(:0) and connect draw
// from the same ephemeral range — and the child fails with "address already
// in use" (seen in CI under load).
//
// A port from Reserve is
//   - below the kernel's ephemeral range (net.ipv4.ip_local_port_range), so
//     no outgoing connection is ever given it;
//   - held by an exclusive flock on a file named after it, in a directory
//     under os.TempDir(), for as long as the reservation lives, so that no
//     other process (another test binary, another checker run) or other
//     reservation of this one picks it meanwhile;
//   - free when handed out: Reserve listens on it once to make sure.
//
// Close the Reservation once the process that uses the port is gone (a
// process exiting drops its flocks anyway).
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lowest is the lowest port Reserve hands out: above the well-known and
// the most common registered service ports.
const lowest = 20000

// Reservation is one port held for its holder until Close.
type Reservation struct {
	// Port is the reserved port.
	Port int
	// Addr is ip:Port.
	Addr string
	lock *os.File
}

// Close ends the reservation: another Reserve may hand the port out again.
func (r *Reservation) Close() error {
	if r == nil || r.lock == nil {
		return nil
	}
	err := r.lock.Close() // drops the flock
	r.lock = nil
	return err
}

// Reserve returns a port of ip that no other reservation holds, that is
// below the kernel's ephemeral range and that was free when checked.
func Reserve(ip string) (*Reservation, error) {
	top := ephemeralLow()
	if top <= lowest+100 {
		return nil, fmt.Errorf("reserve a port on %s: the ephemeral range starts at %d, too low to keep ports apart from it", ip, top)
	}
	dir := lockDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("reserve a port on %s: %w", ip, err)
	}
	span := top - lowest
	start := rand.IntN(span)
	for i := 0; i < span; i++ {
		port := lowest + (start+i)%span
		r, err := try(dir, ip, port)
		if err != nil {
			return nil, err
		}
		if r != nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("reserve a port on %s: every port in [%d, %d) is held or in use", ip, lowest, top)
}

// lockDir holds one lock file per port, shared by every process of the
// machine that reserves.
func lockDir() string { return filepath.Join(os.TempDir(), "raftlock-test-ports") }

// try reserves port of ip if no one holds it and it is free; nil, nil if
// not.
func try(dir, ip string, port int) (*Reservation, error) {
	// One lock file per port, whatever the IP: simpler, and a port taken
	// on one loopback address is rarely wanted on another.
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("reserve port %d: %w", port, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("reserve port %d: flock: %w", port, err)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		f.Close()
		return nil, nil // in use by something that does not reserve
	}
	ln.Close()
	return &Reservation{Port: port, Addr: addr, lock: f}, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}
