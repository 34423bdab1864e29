package node

import (
	"net"
	"sync"
)

// handoff passes the connections of one listener to a succession of
// listeners: first the bootstrap probe's server, then the peer API's. A
// single goroutine accepts, so no connection is taken by a server that has
// stopped. Closing a phase stops only that phase's Accept; closing the last
// (Final) closes the underlying listener.
type handoff struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newHandoff(ln net.Listener) *handoff {
	h := &handoff{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	go h.pump()
	return h
}

func (h *handoff) pump() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			h.close()
			return
		}
		select {
		case h.conns <- c:
		case <-h.done:
			c.Close()
			return
		}
	}
}

func (h *handoff) close() error {
	var err error
	h.once.Do(func() {
		close(h.done)
		err = h.ln.Close()
	})
	return err
}

// phase returns a listener of h's connections whose Close ends only its
// own Accept (final: closes h too).
func (h *handoff) phase(final bool) net.Listener {
	return &phaseListener{h: h, stop: make(chan struct{}), final: final}
}

type phaseListener struct {
	h     *handoff
	stop  chan struct{}
	once  sync.Once
	final bool
}

func (l *phaseListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.h.conns:
		return c, nil
	case <-l.stop:
		return nil, net.ErrClosed
	case <-l.h.done:
		return nil, net.ErrClosed
	}
}

func (l *phaseListener) Close() error {
	l.once.Do(func() { close(l.stop) })
	if l.final {
		return l.h.close()
	}
	return nil
}

func (l *phaseListener) Addr() net.Addr { return l.h.ln.Addr() }
