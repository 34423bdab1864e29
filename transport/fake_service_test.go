package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/sequencer"
)

// fakeService is an in-memory Service for tests: a map of sessions and
// locks, a log index standing in for Raft's, waits by polling.
type fakeService struct {
	mu       sync.Mutex
	leader   LeaderInfo
	sessions map[string]*fakeSession
	locks    map[string]*fakeLock
	members  map[string]Member
	index    uint64

	// calls counts every call but Leader.
	calls atomic.Int64
	// inject, keyed by method name, is returned (and removed) by the next
	// call of that method; "*" matches every method.
	inject map[string][]error
	// panicOn makes the named method panic.
	panicOn string
	// cancelled counts waits that ended by their ctx.
	cancelled atomic.Int64
}

type fakeSession struct {
	Info api.Info
}

type fakeLock struct {
	Mode    sequencer.Mode
	Holders []api.Holder
	Waiters int
	Index   uint64
}

func newFakeService(id string) *fakeService {
	return &fakeService{
		leader:   LeaderInfo{ID: id, HTTPAddr: "", Self: true, Term: 3},
		sessions: map[string]*fakeSession{},
		locks:    map[string]*fakeLock{},
		members:  map[string]Member{},
		inject:   map[string][]error{},
	}
}

func (f *fakeService) setLeader(li LeaderInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = li
}

func (f *fakeService) injectErr(method string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inject[method] = append(f.inject[method], errs...)
}

// enter counts a call and returns an injected error, if any. f.mu is held.
func (f *fakeService) enter(method string) error {
	f.calls.Add(1)
	if f.panicOn == method {
		panic("fake panic in " + method)
	}
	for _, k := range []string{method, "*"} {
		if errs := f.inject[k]; len(errs) > 0 {
			f.inject[k] = errs[1:]
			return errs[0]
		}
	}
	return nil
}

// dump is the fake's whole state, to compare before and after.
func (f *fakeService) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(struct {
		S map[string]*fakeSession
		L map[string]*fakeLock
		M map[string]Member
		I uint64
	}{f.sessions, f.locks, f.members, f.index})
	return string(b)
}

func (f *fakeService) Leader() LeaderInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicOn == "Leader" {
		panic("fake panic in Leader")
	}
	return f.leader
}

func (f *fakeService) OpenSession(ctx context.Context, req api.OpenRequest) (api.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("OpenSession"); err != nil {
		return api.Info{}, err
	}
	if err := req.Resolve(); err != nil {
		return api.Info{}, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	f.index++
	info := api.Info{ID: id, Name: req.Name, TTL: req.TTL, LockDelay: req.LockDelay, Locks: []string{}}
	f.sessions[id] = &fakeSession{Info: info}
	return info, nil
}

func (f *fakeService) KeepAlive(ctx context.Context, id string) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("KeepAlive"); err != nil {
		return 0, err
	}
	if err := api.CheckSessionID(id); err != nil {
		return 0, err
	}
	s, ok := f.sessions[id]
	if !ok {
		return 0, api.Errorf(api.CodeSessionNotFound, "session %s not found", id)
	}
	return s.Info.TTL, nil
}

func (f *fakeService) CloseSession(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CloseSession"); err != nil {
		return err
	}
	if err := api.CheckSessionID(id); err != nil {
		return err
	}
	if _, ok := f.sessions[id]; !ok {
		return api.Errorf(api.CodeSessionNotFound, "session %s not found", id)
	}
	delete(f.sessions, id)
	f.index++
	for name, l := range f.locks {
		kept := l.Holders[:0]
		for _, h := range l.Holders {
			if h.Session != id {
				kept = append(kept, h)
			}
		}
		l.Holders = kept
		f.gc(name)
	}
	return nil
}

func (f *fakeService) SessionInfo(ctx context.Context, id string) (api.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("SessionInfo"); err != nil {
		return api.Info{}, err
	}
	if err := api.CheckSessionID(id); err != nil {
		return api.Info{}, err
	}
	s, ok := f.sessions[id]
	if !ok {
		return api.Info{}, api.Errorf(api.CodeSessionNotFound, "session %s not found", id)
	}
	info := s.Info
	info.Locks = []string{}
	for name, l := range f.locks {
		for _, h := range l.Holders {
			if h.Session == id {
				info.Locks = append(info.Locks, name)
				break
			}
		}
	}
	sort.Strings(info.Locks)
	return info, nil
}

func (f *fakeService) gc(name string) {
	if l := f.locks[name]; l != nil && len(l.Holders) == 0 && l.Waiters == 0 {
		delete(f.locks, name)
	}
}

// tryAcquire grants or refuses at once. f.mu is held.
func (f *fakeService) tryAcquire(req api.AcquireRequest) (api.Grant, bool) {
	l := f.locks[req.Name]
	if l == nil {
		l = &fakeLock{}
		f.locks[req.Name] = l
	}
	grant := func(tok sequencer.Token, m sequencer.Mode) api.Grant {
		return api.Grant{Name: req.Name, Mode: m, Token: tok,
			Sequencer: sequencer.Sequencer{Name: req.Name, Mode: m, Token: tok}, Term: f.leader.Term}
	}
	for _, h := range l.Holders {
		if h.Session == req.Session && h.Holder == req.Holder {
			return grant(h.Token, l.Mode), true // idempotent retry
		}
	}
	if len(l.Holders) > 0 && (l.Mode == sequencer.Exclusive || req.Mode == sequencer.Exclusive) {
		return api.Grant{}, false
	}
	f.index++
	l.Mode = req.Mode
	l.Index = f.index
	l.Holders = append(l.Holders, api.Holder{Session: req.Session, Holder: req.Holder, Token: sequencer.Token(f.index), Value: req.Value})
	return grant(sequencer.Token(f.index), req.Mode), true
}

func (f *fakeService) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	f.mu.Lock()
	if err := f.enter("Acquire"); err != nil {
		f.mu.Unlock()
		return api.Grant{}, err
	}
	if err := req.Resolve(); err != nil {
		f.mu.Unlock()
		return api.Grant{}, err
	}
	if _, ok := f.sessions[req.Session]; !ok {
		f.mu.Unlock()
		return api.Grant{}, api.Errorf(api.CodeSessionNotFound, "session %s not found", req.Session)
	}
	if g, ok := f.tryAcquire(req); ok {
		f.mu.Unlock()
		return g, nil
	}
	if req.Wait == 0 {
		f.gc(req.Name)
		f.mu.Unlock()
		return api.Grant{}, api.Errorf(api.CodeLockBusy, "lock %s is busy", req.Name)
	}
	f.locks[req.Name].Waiters++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if l := f.locks[req.Name]; l != nil {
			l.Waiters--
			f.gc(req.Name)
		}
		f.mu.Unlock()
	}()
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.cancelled.Add(1)
			return api.Grant{}, ctx.Err()
		case <-timer.C:
			return api.Grant{}, api.Errorf(api.CodeWaitTimeout, "not granted within %v", req.Wait)
		case <-tick.C:
		}
		f.mu.Lock()
		if _, ok := f.sessions[req.Session]; !ok {
			f.mu.Unlock()
			return api.Grant{}, api.Errorf(api.CodeSessionNotFound, "session closed while waiting")
		}
		g, ok := f.tryAcquire(req)
		f.mu.Unlock()
		if ok {
			return g, nil
		}
	}
}

func (f *fakeService) Release(ctx context.Context, req api.ReleaseRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Release"); err != nil {
		return err
	}
	if err := req.Check(); err != nil {
		return err
	}
	if _, ok := f.sessions[req.Session]; !ok {
		return api.Errorf(api.CodeSessionNotFound, "session %s not found", req.Session)
	}
	l := f.locks[req.Name]
	if l == nil || len(l.Holders) == 0 {
		return nil // releasing a free lock is a no-op
	}
	for i, h := range l.Holders {
		if h.Session == req.Session && h.Holder == req.Holder {
			l.Holders = append(l.Holders[:i], l.Holders[i+1:]...)
			f.index++
			l.Index = f.index
			f.gc(req.Name)
			return nil
		}
	}
	return api.Errorf(api.CodeNotHolder, "not a holder of %s", req.Name)
}

func (f *fakeService) lockState(name string) api.LockState {
	l := f.locks[name]
	if l == nil || len(l.Holders) == 0 && l.Waiters == 0 {
		return api.LockState{Name: name, Holders: []api.Holder{}, Index: f.index}
	}
	st := api.LockState{Name: name, Mode: l.Mode, Holders: append([]api.Holder{}, l.Holders...), Waiters: l.Waiters, Index: l.Index}
	if len(l.Holders) == 0 {
		st.Mode = 0
	}
	return st
}

func (f *fakeService) LockState(ctx context.Context, name string) (api.LockState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Lock"); err != nil {
		return api.LockState{}, err
	}
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	return f.lockState(name), nil
}

// WatchLock polls (it is a fake) until the lock's index passes index.
func (f *fakeService) WatchLock(ctx context.Context, name string, index uint64, wait time.Duration) (api.LockState, error) {
	f.mu.Lock()
	err := f.enter("WatchLock")
	f.mu.Unlock()
	if err != nil {
		return api.LockState{}, err
	}
	if err := api.ValidateLockName(name); err != nil {
		return api.LockState{}, err
	}
	if wait == 0 {
		wait = api.DefaultWatchWait
	}
	if err := api.CheckWatchWait("wait", wait); err != nil {
		return api.LockState{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		f.mu.Lock()
		st := f.lockState(name)
		f.mu.Unlock()
		if index == 0 || st.Index > index || !time.Now().Before(deadline) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return api.LockState{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *fakeService) Locks(ctx context.Context, prefix string) ([]api.LockState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Locks"); err != nil {
		return nil, err
	}
	if err := api.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	var names []string
	for name := range f.locks {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := []api.LockState{}
	for _, n := range names {
		out = append(out, f.lockState(n))
	}
	return out, nil
}

func (f *fakeService) CheckSequencer(ctx context.Context, text string) (api.SequencerCheck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CheckSequencer"); err != nil {
		return api.SequencerCheck{}, err
	}
	seq, err := sequencer.Parse(text)
	if err != nil {
		return api.SequencerCheck{}, api.Errorf(api.CodeInvalidArgument, "%v", err)
	}
	var out api.SequencerCheck
	if l := f.locks[seq.Name]; l != nil {
		for _, h := range l.Holders {
			out.CurrentToken = max(out.CurrentToken, h.Token)
			if h.Token == seq.Token && l.Mode == seq.Mode {
				out.Valid = true
			}
		}
	}
	return out, nil
}

func (f *fakeService) Cluster(ctx context.Context) (ClusterInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Cluster"); err != nil {
		return ClusterInfo{}, err
	}
	info := ClusterInfo{Leader: f.leader.ID, Term: f.leader.Term, CommitIndex: f.index, Members: []Member{}}
	ids := make([]string, 0, len(f.members))
	for id := range f.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		info.Members = append(info.Members, f.members[id])
	}
	return info, nil
}

func (f *fakeService) RegisterMember(ctx context.Context, m Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("RegisterMember"); err != nil {
		return err
	}
	f.members[m.ID] = m
	return nil
}
