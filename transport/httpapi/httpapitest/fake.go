package httpapitest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
)

// Fake is the in-memory httpapi.Service of the tests: the contract's fake
// lock service (apitest.Backend: its hooks count, log, fail and block the
// calls) plus what a replica adds for the HTTP server: its view of the
// leader, the member table and the cluster's answer. Leader is not a call
// of the fake (the server asks it on every request). The other roles are
// Absent's.
type Fake struct {
	*apitest.Backend
	Absent

	mu      sync.Mutex
	leader  api.LeaderInfo
	members map[string]api.Member
	// LeaderPanics makes Leader panic.
	LeaderPanics atomic.Bool
}

// New returns a Fake that leads, as replica id, in term 3.
func New(id string) *Fake {
	f := &Fake{Backend: apitest.New(), members: map[string]api.Member{}}
	f.SetLeader(api.LeaderInfo{ID: id, Self: true, Term: 3})
	return f
}

// SetLeader sets the replica's view of the leader; its grants carry the
// term.
func (f *Fake) SetLeader(li api.LeaderInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = li
	f.SetTerm(li.Term)
}

// State is the fake's whole state, to compare before and after.
func (f *Fake) State() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.Dump(), f.members)
}

// Leader implements httpapi.Replica.
func (f *Fake) Leader() api.LeaderInfo {
	if f.LeaderPanics.Load() {
		panic("fake panic in Leader")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

// Cluster implements httpapi.Replica.
func (f *Fake) Cluster(ctx context.Context) (api.ClusterInfo, error) {
	var info api.ClusterInfo
	err := f.Do(ctx, "Cluster", nil, func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		info = api.ClusterInfo{Leader: f.leader.ID, Term: f.leader.Term, CommitIndex: f.Index(), Members: []api.Member{}}
		for _, id := range slices.Sorted(maps.Keys(f.members)) {
			info.Members = append(info.Members, f.members[id])
		}
		return nil
	})
	return info, err
}

// RegisterMember implements httpapi.Replica.
func (f *Fake) RegisterMember(ctx context.Context, m api.Member) error {
	return f.Do(ctx, "RegisterMember", m, func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.members[m.ID] = m
		return nil
	})
}

// LocksPage implements httpapi.Replica: one page of the full listing.
func (f *Fake) LocksPage(ctx context.Context, q api.LocksQuery) (api.LocksPage, error) {
	return LocksPage(ctx, f.Backend, q)
}

// WatchLocks implements httpapi.Replica from the full listing.
func (f *Fake) WatchLocks(ctx context.Context, prefix string, index uint64, wait time.Duration) (api.LocksChange, error) {
	return WatchLocks(ctx, f.Backend, prefix, index, wait)
}

// ResetPage implements httpapi.Replica (the package's ResetPage).
func (f *Fake) ResetPage(ctx context.Context, prefix string, index uint64, after string) (api.LocksChange, error) {
	return ResetPage(ctx, f.Backend, prefix, index, after)
}

// Member returns the member record of id, if the fake holds one.
func (f *Fake) Member(id string) (api.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[id]
	return m, ok
}
