package fsm

import (
	"sort"
)

// setMember records a member's addresses.
func (f *FSM) setMember(_ uint64, m *Member) Status {
	f.members[m.ID] = *m
	f.membersGen.Add(1)
	return StatusOK
}

// MembersGeneration changes (grows) whenever the member records may have
// changed: a reader that saw generation g before calling Members may keep
// what Members returned for as long as MembersGeneration still returns g.
// It is not replicated state: replicas count differently.
func (f *FSM) MembersGeneration() uint64 {
	return f.membersGen.Load()
}

// Members returns the recorded member addresses, sorted by id.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CommandsRead returns the highest command version every member of ids
// reads, by their member records: VersionJSON if any has no record or an
// old build's (Member.Commands 0), at most Version.
func (f *FSM) CommandsRead(ids []string) byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v := Version
	for _, id := range ids {
		m, ok := f.members[id]
		if !ok || m.Commands < VersionJSON {
			return VersionJSON
		}
		v = min(v, m.Commands)
	}
	return v
}
