// Package warnlimit rate-limits WARN lines per error code, for the HTTP
// server and the peer port: one line per code per Every, counting the ones
// it leaves out.
package warnlimit

import (
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// Every is how often the server logs a WARN line for failures of one
// code, at most.
const Every = 10 * time.Second

// Limiter rate-limits WARN lines per error code: one per Every,
// counting the ones it leaves out.
type Limiter struct {
	Now func() time.Time // nil: time.Now

	mu         sync.Mutex
	last       map[api.Code]time.Time
	suppressed map[api.Code]int
}

// Allow reports whether a line for code may be written now and, if so, how
// many were left out since the last one.
func (l *Limiter) Allow(code api.Code) (ok bool, suppressed int) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	t := now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, seen := l.last[code]; seen && t.Sub(last) < Every {
		l.suppressed[code]++
		return false, 0
	}
	if l.last == nil {
		l.last, l.suppressed = make(map[api.Code]time.Time), make(map[api.Code]int)
	}
	l.last[code] = t
	suppressed = l.suppressed[code]
	delete(l.suppressed, code)
	return true, suppressed
}
