package fsm

import "fmt"

// Summary describes a serialised state (a Dump): what a backup holds.
type Summary struct {
	// Applied is the index of the last entry the state had applied.
	Applied uint64 `json:"applied"`
	// Sessions, Locks (held, waited for, in lock-delay or kept free with
	// their history), Members and Tokens (ACL) count the state's records.
	Sessions int `json:"sessions"`
	Locks    int `json:"locks"`
	Held     int `json:"held"`
	Members  int `json:"members"`
	Tokens   int `json:"acl_tokens"`
	// Bootstrapped: the ACL bootstrap had happened.
	Bootstrapped bool `json:"acl_bootstrapped"`
}

// Inspect decodes a Dump completely, as Restore would, and summarises it.
// An error means Restore would refuse it.
func Inspect(data []byte) (Summary, error) {
	f := New(nil)
	if err := f.Load(data); err != nil {
		return Summary{}, err
	}
	return f.summary(), nil
}

func (f *FSM) summary() Summary {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := Summary{Applied: f.applied, Sessions: len(f.sessions), Locks: len(f.locks), Members: len(f.members),
		Tokens: len(f.tokens), Bootstrapped: f.bootstrapped}
	for _, l := range f.locks {
		if len(l.Holders) > 0 {
			s.Held++
		}
	}
	return s
}

// PrepareRestore returns a Dump (data) prepared to be restored into a
// running cluster whose members are members and whose log may have passed
// floor. The member table (HTTP addresses) becomes members: the backup's
// may name nodes that are gone. And tokens up to floor may have been
// issued that the state does not record (grants made after the backup was
// taken), so the state must not claim to know them. Its applied index
// becomes at least floor (a lock's index never goes backwards across the
// restore), every lock history, held or free, says it is complete only
// from floor+1 (GrantsSince), and so does the state for locks it has no
// record of (forgot). The restore itself puts every later entry, hence
// every later token, above floor (node's restore). Sessions and locks are
// unchanged. data is decoded completely first: an error means the state
// would not restore.
func PrepareRestore(data []byte, floor uint64, members []Member) ([]byte, error) {
	f := New(nil)
	if err := f.Load(data); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.applied = max(f.applied, floor)
	f.forgot = max(f.forgot, floor)
	raise := func(l *Lock) {
		l.GrantsSince = max(l.GrantsSince, floor+1)
	}
	for _, l := range f.locks {
		raise(l)
	}
	for e := f.free.Front(); e != nil; e = e.Next() {
		raise(e.Value.(*Lock))
	}
	f.members = make(map[string]Member, len(members))
	for _, m := range members {
		f.members[m.ID] = m
	}
	f.mu.Unlock()
	out := f.Dump()
	if _, err := Inspect(out); err != nil {
		return nil, fmt.Errorf("fsm: prepare restore: the state no longer decodes: %w", err)
	}
	return out, nil
}
