package fsm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// tableSamples has one command of every registered type, every field set
// (sampleCommands lacks the reset, which version 4 alone carries).
func tableSamples() []Command {
	return append(sampleCommands(), Command{Type: CmdACLBootstrapReset, Now: 14,
		ACLBootstrapReset: &ACLBootstrapReset{ResetIndex: 7, Token: Token{ID: "t2", Name: "management", Hash: "h2", Rules: []string{"admin"}}}},
		Command{Type: CmdRevokeGrant, Now: 15, RevokeGrant: &RevokeGrant{Lock: "jobs/leader", Session: "s", Holder: "h-1", Token: 9,
			Kind: RevokeKindAdmin, Reason: "stuck", By: "t1"}},
		Command{Type: CmdRequestRelease, Now: 17, RequestRelease: &RequestRelease{Lock: "jobs/leader", Session: "s2", Holder: "h-2"}},
		Command{Type: CmdRevokeSession, Now: 16, RevokeSession: &RevokeSession{ID: "s", Reason: "stuck", By: "t1"}})
}

// Every type in the command table has a name, and round-trips through
// every format version that carries it: what it encodes decodes to the
// same command, and the type is refused in a version before its own.
func TestEveryRegisteredCommandRoundTrips(t *testing.T) {
	samples := map[CommandType]Command{}
	for _, c := range tableSamples() {
		samples[c.Type] = c
	}
	if len(commands) != len(samples) {
		t.Fatalf("%d types registered, %d sampled: a new type needs a sample here", len(commands), len(samples))
	}
	for typ, s := range commands {
		c, ok := samples[typ]
		if !ok {
			t.Errorf("registered type %d (%s) has no sample", typ, s.name)
			continue
		}
		if typ.String() != s.name || s.name == "" || strings.HasPrefix(s.name, "command(") {
			t.Errorf("type %d: String %q, table name %q", typ, typ.String(), s.name)
		}
		for _, v := range []byte{VersionJSON, VersionBinary, VersionTokenLimits, VersionLockOptions} {
			data, err := c.EncodeAs(v)
			if v < s.since {
				if err == nil {
					t.Errorf("%s encoded as version %d, before its own %d", typ, v, s.since)
				}
				continue
			}
			if err != nil {
				t.Fatalf("EncodeAs(%s, %d): %v", typ, v, err)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode(%s, version %d): %v", typ, v, err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Errorf("%s, version %d:\n got %+v\nwant %+v", typ, v, got, c)
			}
		}
		if r := New(nil).ApplyCommand(1, Command{Type: typ}); r.Status != StatusInvalid {
			t.Errorf("%s without its payload applied as %s, want invalid", typ, r.Status)
		}
	}
}

// A type the table does not know is refused everywhere: Encode, Decode
// of every format (ErrDecode), and Apply (StatusInvalid), as before the
// table.
func TestUnknownCommandTypeIsRefused(t *testing.T) {
	for _, typ := range []CommandType{0, 99, 199, 255} {
		c := Command{Type: typ, Now: 1, Release: &LockRef{Lock: "l", Session: "s", Holder: "h"}}
		if _, err := c.Encode(); err == nil || !strings.Contains(err.Error(), "unknown command type") {
			t.Errorf("Encode(type %d) = %v, want unknown command type", typ, err)
		}
		for name, data := range map[string][]byte{
			"binary":    checksummed([]byte{VersionTokenLimits, byte(typ), 2, 0}),
			"json":      checksummed(append([]byte{VersionJSON, byte(typ)}, `{"now":1,"arg":{}}`...)),
			"unchecked": append([]byte{VersionUnchecked, byte(typ)}, `{"now":1,"arg":{}}`...),
		} {
			got, err := Decode(data)
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "unknown command type") || !reflect.DeepEqual(got, Command{}) {
				t.Errorf("Decode(%s type %d) = %+v, %v; want ErrDecode, unknown command type", name, typ, got, err)
			}
		}
		if r := New(nil).ApplyCommand(1, c); r.Status != StatusInvalid {
			t.Errorf("ApplyCommand(type %d) = %s, want invalid", typ, r.Status)
		}
	}
}
