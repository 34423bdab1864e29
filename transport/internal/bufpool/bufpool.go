// Package bufpool is the pool of byte buffers that the HTTP server
// (transport/httpapi) and the Go client (transport/client) read bodies and
// answers into, and ReadAll, io.ReadAll into such a buffer. Standard
// library only, so that the client stays lean.
package bufpool

import (
	"io"
	"sync"
)

// pool holds the buffers. A buffer is used only while its request or
// answer is handled: decoders copy what they keep, and an io.Writer does
// not retain what it is given.
var pool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooled is the largest buffer Put keeps: a rare large body does not
// keep its memory.
const maxPooled = 16 << 10

// Get returns an empty buffer from the pool.
func Get() *[]byte { return pool.Get().(*[]byte) }

// Put empties b and returns it to the pool, unless it grew past 16 KiB.
func Put(b *[]byte) {
	if cap(*b) <= maxPooled {
		*b = (*b)[:0]
		pool.Put(b)
	}
}

// ReadAll is io.ReadAll into buf (appending): the same data and errors,
// without the growth from 512 bytes when buf has room.
func ReadAll(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf)-len(buf) < 512 {
		buf = append(buf, make([]byte, 512)...)[:len(buf)]
	}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
	}
}
