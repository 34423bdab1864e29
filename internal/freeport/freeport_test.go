package freeport

import (
	"net"
	"testing"
)

// A reserved port is never handed out twice while reserved, lies below the
// ephemeral range, and is free to listen on.
func TestReservedPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	var held []*Reservation
	defer func() {
		for _, r := range held {
			r.Close()
		}
	}()
	for i := 0; i < 200; i++ {
		r, err := Reserve("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
		if seen[r.Port] {
			t.Fatalf("port %d handed out twice", r.Port)
		}
		seen[r.Port] = true
		if r.Port < lowest || r.Port >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", r.Port, lowest, ephemeralLow())
		}
	}
	ln, err := net.Listen("tcp", held[0].Addr)
	if err != nil {
		t.Fatalf("reserved port not free: %v", err)
	}
	ln.Close()
}

// A port is handed out again once its reservation is closed, but not
// before: the lock is what keeps two holders apart.
func TestClosedReservationFreesItsPort(t *testing.T) {
	r, err := Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if got, err := try(dir, "127.0.0.1", r.Port); err != nil || got == nil {
		t.Fatalf("a different lock dir must not conflict: %v %v", got, err)
	} else {
		got.Close()
	}
	again, err := try(lockDir(), "127.0.0.1", r.Port)
	if err != nil || again != nil {
		t.Fatalf("a reserved port was handed out again: %+v %v", again, err)
	}
	r.Close()
	again, err = try(lockDir(), "127.0.0.1", r.Port)
	if err != nil || again == nil {
		t.Fatalf("a released port was not handed out: %v", err)
	}
	again.Close()
}
