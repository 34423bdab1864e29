package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

// A lock's grant history crosses the wire as "grants" (oldest first: token,
// mode, holder, value, session_name; never a session id) and
// "grants_since", and decodes to the same LockState.
func TestLockReplyCarriesTheGrantHistory(t *testing.T) {
	in := LockState{Name: "e", Mode: sequencer.Exclusive, Holders: []Holder{{SessionHandle: "0123456789abcdef", SessionName: "bob", Holder: "h2", Token: 9, Value: "b"}},
		Index: 9, GrantsSince: 3, Grants: []PastGrant{
			{Token: 5, Mode: sequencer.Exclusive, Holder: "h1", Value: "a", SessionName: "alice"},
			{Token: 7, Mode: sequencer.Shared, Holder: "r", SessionName: "reader"},
			{Token: 9, Mode: sequencer.Exclusive, Holder: "h2", Value: "b", SessionName: "bob"},
		}}
	data, err := json.Marshal(NewLockReply(in))
	if err != nil {
		t.Fatal(err)
	}
	const wire = `"grants":[{"token":5,"mode":"exclusive","holder":"h1","value":"a","session_name":"alice"},` +
		`{"token":7,"mode":"shared","holder":"r","value":"","session_name":"reader"},` +
		`{"token":9,"mode":"exclusive","holder":"h2","value":"b","session_name":"bob"}],"grants_since":3}`
	if !strings.HasSuffix(string(data), wire) {
		t.Fatalf("wire form %s, want it to end with %s", data, wire)
	}
	var r LockReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	out, err := r.State()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Grants, in.Grants) || out.GrantsSince != in.GrantsSince {
		t.Fatalf("decoded history %+v since %d, want %+v since %d", out.Grants, out.GrantsSince, in.Grants, in.GrantsSince)
	}
}

// An answer without a history (a server from before histories) decodes to
// none, with GrantsSince 0; an empty history is left off the wire but its
// reach is not.
func TestLockReplyWithoutGrantHistory(t *testing.T) {
	var r LockReply
	if err := json.Unmarshal([]byte(`{"name":"e","mode":"","holders":[],"waiters":0,"queue":[],"index":4}`), &r); err != nil {
		t.Fatal(err)
	}
	out, err := r.State()
	if err != nil || out.Grants != nil || out.GrantsSince != 0 {
		t.Fatalf("old answer decoded to %+v, %v; want no history and GrantsSince 0", out, err)
	}
	data, err := json.Marshal(NewLockReply(LockState{Name: "e", Holders: []Holder{}, Index: 4, GrantsSince: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, `"grants":`) || !strings.HasSuffix(s, `"index":4,"grants_since":5}`) {
		t.Fatalf("empty history on the wire: %s", s)
	}
}

// A grant with an unknown mode is refused with the lock and the token named.
func TestLockReplyRejectsABadGrantMode(t *testing.T) {
	r := LockReply{Name: "e", Grants: []PastGrantReply{{Token: 5, Mode: "sideways", Holder: "h"}}}
	if _, err := r.State(); err == nil || !strings.Contains(err.Error(), "lock e: grant 5") {
		t.Fatalf("bad grant mode: %v", err)
	}
}
