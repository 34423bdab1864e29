package node

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftWatch follows Raft's observations: it logs every leader change (on
// every node, with the leader's id and the term) and, on the leader, a
// peer that stops answering heartbeats once when it goes down, then at
// most once per raftLogEvery while it stays down, and once when it comes
// back. Its view of the peers that are down also feeds health (health.go).
type raftWatch struct {
	log   hclog.Logger
	now   func() time.Time
	every time.Duration
	self  raft.ServerID

	mu   sync.Mutex
	down map[raft.ServerID]*peerDown
}

// peerDown is one peer the leader cannot heartbeat.
type peerDown struct {
	since    time.Time // first failed heartbeat
	lastLine time.Time // last line logged about it
	failures int       // failed heartbeats since lastLine
}

func newRaftWatch(log hclog.Logger, self string) *raftWatch {
	return &raftWatch{log: log, now: time.Now, every: raftLogEvery, self: raft.ServerID(self),
		down: make(map[raft.ServerID]*peerDown)}
}

// run registers an observer on r and handles its observations until stop
// is closed.
func (w *raftWatch) run(r *raft.Raft, stop <-chan struct{}) {
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation,
			raft.PeerObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	defer r.DeregisterObserver(obs)
	for {
		select {
		case <-stop:
			return
		case o := <-ch:
			w.observe(o.Data, r.CurrentTerm)
		}
	}
}

// observe handles one observation; term reads the current term.
func (w *raftWatch) observe(data any, term func() uint64) {
	switch d := data.(type) {
	case raft.LeaderObservation:
		if d.LeaderID == "" {
			w.log.Warn("no leader", "term", term())
		} else {
			w.log.Info("leader changed", "leader", string(d.LeaderID), "leader_addr", string(d.LeaderAddr),
				"term", term(), "self", d.LeaderID == w.self)
		}
		if d.LeaderID != w.self {
			w.mu.Lock()
			clear(w.down) // only the leader heartbeats
			w.mu.Unlock()
		}
	case raft.FailedHeartbeatObservation:
		w.failed(d.PeerID, d.LastContact)
	case raft.ResumedHeartbeatObservation:
		w.resumed(d.PeerID)
	case raft.PeerObservation:
		w.forget(d.Peer.ID)
	}
}

// forget drops what the watch knew of peer id: the leader started or
// stopped replicating to it (it joined, was removed, or was removed and
// added again under the same id, as a repaired member is). Replication to
// a removed peer ends without a resumed heartbeat, and a new one starts
// with no failure to resume from: without this, a member repaired under
// its old id stayed down in health for good ("leader reaches 1 of 3
// voters") while it served.
func (w *raftWatch) forget(id raft.ServerID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.down, id)
}

func (w *raftWatch) failed(id raft.ServerID, lastContact time.Time) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.down[id]
	if p == nil {
		w.down[id] = &peerDown{since: now, lastLine: now}
		args := []any{"peer", string(id)}
		if !lastContact.IsZero() {
			args = append(args, "last_contact", lastContact.UTC().Format(time.RFC3339Nano))
		}
		w.log.Warn("peer unreachable: heartbeats fail", args...)
		return
	}
	p.failures++
	if now.Sub(p.lastLine) >= w.every {
		w.log.Warn("peer still unreachable", "peer", string(id), "down_for", now.Sub(p.since).Round(time.Second),
			"failed_heartbeats", p.failures)
		p.lastLine, p.failures = now, 0
	}
}

func (w *raftWatch) resumed(id raft.ServerID) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.down[id]
	if p == nil {
		return
	}
	delete(w.down, id)
	w.log.Info("peer reachable again", "peer", string(id), "down_for", now.Sub(p.since).Round(time.Millisecond))
}

// isDown reports whether the leader currently fails to heartbeat id.
func (w *raftWatch) isDown(id raft.ServerID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.down[id] != nil
}
