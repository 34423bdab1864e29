package transport

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/raftlock/raftlock/api"
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
	leader  api.LeaderInfo
	members map[string]api.Member
	// leaderPanics makes Leader panic.
	leaderPanics atomic.Bool
}

func newFakeService(id string) *fakeService {
	f := &fakeService{Backend: apitest.New(), members: map[string]api.Member{}}
	f.setLeader(api.LeaderInfo{ID: id, Self: true, Term: 3})
	return f
}

// setLeader sets the replica's view of the leader; its grants carry the
// term.
func (f *fakeService) setLeader(li api.LeaderInfo) {
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

func (f *fakeService) Leader() api.LeaderInfo {
	if f.leaderPanics.Load() {
		panic("fake panic in Leader")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeService) Cluster(ctx context.Context) (api.ClusterInfo, error) {
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

func (f *fakeService) RegisterMember(ctx context.Context, m api.Member) error {
	return f.Do(ctx, "RegisterMember", m, func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.members[m.ID] = m
		return nil
	})
}
