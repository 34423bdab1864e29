package transport

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/raftlock/raftlock/api/apitest"
)

// fakeService is the in-memory Service of the tests: the contract's fake
// lock service (apitest.Backend: its hooks count, log, fail and block the
// calls) plus what a replica adds for the HTTP server: its view of the
// leader, the member table and the cluster's answer. Leader is not a call
// of the fake (the server asks it on every request).
type fakeService struct {
	*apitest.Backend

	mu      sync.Mutex
	leader  LeaderInfo
	members map[string]Member
	// leaderPanics makes Leader panic.
	leaderPanics atomic.Bool
}

func newFakeService(id string) *fakeService {
	f := &fakeService{Backend: apitest.New(), members: map[string]Member{}}
	f.setLeader(LeaderInfo{ID: id, Self: true, Term: 3})
	return f
}

// setLeader sets the replica's view of the leader; its grants carry the
// term.
func (f *fakeService) setLeader(li LeaderInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = li
	f.SetTerm(li.Term)
}

// dump is the fake's whole state, to compare before and after.
func (f *fakeService) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.Dump(), f.members)
}

func (f *fakeService) Leader() LeaderInfo {
	if f.leaderPanics.Load() {
		panic("fake panic in Leader")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeService) Cluster(ctx context.Context) (ClusterInfo, error) {
	var info ClusterInfo
	err := f.Do(ctx, "Cluster", nil, func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		info = ClusterInfo{Leader: f.leader.ID, Term: f.leader.Term, CommitIndex: f.Index(), Members: []Member{}}
		for _, id := range slices.Sorted(maps.Keys(f.members)) {
			info.Members = append(info.Members, f.members[id])
		}
		return nil
	})
	return info, err
}

func (f *fakeService) RegisterMember(ctx context.Context, m Member) error {
	return f.Do(ctx, "RegisterMember", m, func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.members[m.ID] = m
		return nil
	})
}
