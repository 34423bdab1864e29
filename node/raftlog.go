package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftLogEvery is how often, at most, a rate-limited Raft message is
// logged (per message and peer), and how often the peer tracker
// (raftwatch.go) repeats that a peer is still down.
const raftLogEvery = time.Minute

// raftQuiet are the hashicorp/raft messages a dead peer repeats several
// times a second for as long as it is down: they go to DEBUG, and the
// node's peer tracker (raftwatch.go) logs the peer going down, still down
// once a minute, and back.
var raftQuiet = map[string]bool{
	"failed to heartbeat to":                  true,
	"failed to appendEntries to":              true,
	"failed to pipeline appendEntries":        true,
	"failed to start pipeline replication to": true,
	"failed to contact":                       true,
	// The transport, when a peer's connection breaks (reset or cut short):
	// a peer that stops or dies, every time. The leader changes and the
	// peer tracker's lines say what it means.
	"failed to decode incoming command": true,
}

// raftLimited are the hashicorp/raft messages a node without quorum
// repeats every election round (about twice a second): logged at most once
// per raftLogEvery per message and peer, with how many were left out.
var raftLimited = map[string]bool{
	"failed to make requestVote RPC":                true,
	"Election timeout reached, restarting election": true,
	"heartbeat timeout reached, starting election":  true,
	// INFO, every election round of a node without quorum:
	"entering candidate state":                               true,
	"pre-vote campaign failed, waiting for election timeout": true,
}

// raftAfterRestore are the hashicorp/raft messages that a user restore
// (raft.Restore) makes the leader write for the entries it compacted away:
// its replication still asks for them once or twice before it sends the
// followers the restored snapshot, and its apply loop skips the entries
// below it. Within raftRestoreQuiet of a restore they are expected, and go
// to DEBUG; at any other time they keep their level.
var raftAfterRestore = map[string]bool{
	"failed to get log":               true,
	"skipping application of old log": true,
}

// raftRestoreQuiet is how long after a restore raftAfterRestore lines are
// demoted.
const raftRestoreQuiet = 10 * time.Second

// raftLogger wraps the logger given to hashicorp/raft: it demotes the
// messages of raftQuiet to DEBUG and rate-limits those of raftLimited;
// everything else passes through. The loggers it derives (Named, With)
// filter alike, sharing the limiter.
type raftLogger struct {
	hclog.Logger
	lim *logLimiter
}

// newRaftLogger wraps l.
func newRaftLogger(l hclog.Logger) *raftLogger {
	return &raftLogger{Logger: l, lim: &logLimiter{now: time.Now, every: raftLogEvery}}
}

// Log implements hclog.Logger.
func (l *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Info {
		var ok bool
		if level, args, ok = l.filter(level, msg, args); !ok {
			return
		}
	}
	l.Logger.Log(level, msg, args...)
}

// Info implements hclog.Logger.
func (l *raftLogger) Info(msg string, args ...any) { l.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (l *raftLogger) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (l *raftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

// Named implements hclog.Logger.
func (l *raftLogger) Named(name string) hclog.Logger {
	return &raftLogger{Logger: l.Logger.Named(name), lim: l.lim}
}

// ResetNamed implements hclog.Logger.
func (l *raftLogger) ResetNamed(name string) hclog.Logger {
	return &raftLogger{Logger: l.Logger.ResetNamed(name), lim: l.lim}
}

// With implements hclog.Logger.
func (l *raftLogger) With(args ...any) hclog.Logger {
	return &raftLogger{Logger: l.Logger.With(args...), lim: l.lim}
}

// filter decides the fate of a line at INFO or above: its level and
// arguments, or ok false to drop it.
func (l *raftLogger) filter(level hclog.Level, msg string, args []any) (hclog.Level, []any, bool) {
	if raftQuiet[msg] || (raftAfterRestore[msg] && l.lim.sinceRestore() < raftRestoreQuiet) {
		return hclog.Debug, args, true
	}
	if !raftLimited[msg] {
		return level, args, true
	}
	key := msg
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "target" || k == "peer" || k == "id" {
			key += fmt.Sprintf("|%v", args[i+1])
		}
	}
	ok, suppressed := l.lim.allow(key)
	if !ok {
		return level, nil, false
	}
	if suppressed > 0 {
		args = append(args[:len(args):len(args)], "suppressed", suppressed)
	}
	return level, args, true
}

// logLimiter lets one line per key through per period, counting the ones
// it holds back.
type logLimiter struct {
	now   func() time.Time
	every time.Duration

	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
	// restored is when the node last restored a backup (zero: never).
	restored time.Time
}

// restoring notes that the node restores a backup now (raftAfterRestore).
func (l *logLimiter) restoring() {
	l.mu.Lock()
	l.restored = l.now()
	l.mu.Unlock()
}

// sinceRestore is how long ago the node last restored a backup (a very
// long time if never).
func (l *logLimiter) sinceRestore() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.restored.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return l.now().Sub(l.restored)
}

// allow reports whether a line for key may be written now and, if so, how
// many were held back since the last one.
func (l *logLimiter) allow(key string) (ok bool, suppressed int) {
	t := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, seen := l.last[key]; seen && t.Sub(last) < l.every {
		l.suppressed[key]++
		return false, 0
	}
	if l.last == nil {
		l.last, l.suppressed = make(map[string]time.Time), make(map[string]int)
	}
	l.last[key] = t
	suppressed = l.suppressed[key]
	delete(l.suppressed, key)
	return true, suppressed
}
