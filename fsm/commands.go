package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/sequencer"
)

// The command table: every command type, registered once, with what the
// codec and Apply need of it. Adding a command is one registerCommand
// call (and its Cmd value, its payload type and field in Command); no
// switch elsewhere names the types. Consul's fsm.registerCommand is the
// model.

// commandSpec is what the state machine knows of one command type. Its
// functions take and return Commands, encoders and decoders by value, never
// a pointer to a caller's local: a pointer passed through a function value
// escapes, and every replica decodes and applies every entry (an
// allocation more per entry is measurable in BenchmarkApplyAcquireRelease).
type commandSpec struct {
	// name is CommandType.String's answer.
	name string
	// since is the first format version that carries the type: a leader
	// never writes it in an older one (a replica that reads no more would
	// halt on it).
	since byte
	// payload returns c's payload of this type, and whether it is set;
	// fresh returns a command with a new zero payload and that payload
	// (to decode JSON into).
	payload func(c Command) (any, bool)
	fresh   func() (Command, any)
	// encode appends the payload's fields in the binary format; decode
	// reads them into a command (the first error sticks in the decoder).
	encode func(e binaryEncoder, c Command) binaryEncoder
	decode func(d binaryDecoder) (Command, binaryDecoder)
	// apply applies the command at index, with f.mu held.
	apply func(f *FSM, index uint64, c Command) Result
}

// commands is the table, by type, filled once by init and only read after.
// Values of CommandType are part of the log format: never renumber.
var commands = map[CommandType]*commandSpec{}

// command is one type's registration: how to find its payload in a
// Command and wrap one in it, the payload's binary fields both ways, and
// the function that applies it.
type command[P any] struct {
	name   string
	since  byte // 0: VersionUnchecked, every version
	get    func(Command) *P
	wrap   func(*P) Command
	encode func(binaryEncoder, *P) binaryEncoder
	decode func(binaryDecoder) (*P, binaryDecoder)
	apply  func(*FSM, uint64, *P) Result
}

// registerCommand records type t in the table. It is called once per
// type, from init.
func registerCommand[P any](t CommandType, r command[P]) {
	if _, dup := commands[t]; dup {
		panic(fmt.Sprintf("fsm: command type %d registered twice", uint8(t)))
	}
	commands[t] = &commandSpec{
		name:  r.name,
		since: max(r.since, VersionUnchecked),
		payload: func(c Command) (any, bool) {
			p := r.get(c)
			return p, p != nil
		},
		fresh: func() (Command, any) {
			p := new(P)
			return r.wrap(p), p
		},
		encode: func(e binaryEncoder, c Command) binaryEncoder { return r.encode(e, r.get(c)) },
		decode: func(d binaryDecoder) (Command, binaryDecoder) {
			p, d := r.decode(d)
			return r.wrap(p), d
		},
		apply: func(f *FSM, index uint64, c Command) Result {
			p := r.get(c)
			if p == nil {
				return Result{Index: index, Status: StatusInvalid}
			}
			return r.apply(f, index, p)
		},
	}
}

// status adapts an apply function that returns only a Status.
func status[P any](apply func(*FSM, uint64, *P) Status) func(*FSM, uint64, *P) Result {
	return func(f *FSM, index uint64, p *P) Result { return Result{Index: index, Status: apply(f, index, p)} }
}

// The types, in the order of their values. Each entity's apply functions
// live in its file (sessions.go, locks.go, acl.go, members.go, hold.go).
func init() {
	registerCommand(CmdOpenSession, command[OpenSession]{name: "open_session",
		get:  func(c Command) *OpenSession { return c.OpenSession },
		wrap: func(p *OpenSession) Command { return Command{OpenSession: p} },
		encode: func(e binaryEncoder, p *OpenSession) binaryEncoder {
			e.str(p.ID)
			e.str(p.Name)
			e.int(p.TTL)
			e.int(p.LockDelay)
			e.limits(p.Limits)
			e.str(p.Owner)
			return e
		},
		decode: func(d binaryDecoder) (*OpenSession, binaryDecoder) {
			p := &OpenSession{ID: d.str("id"), Name: d.str("name"), TTL: d.int("ttl"),
				LockDelay: d.int("lock_delay"), Limits: d.limits("limits"), Owner: d.str("owner")}
			return p, d
		},
		apply: func(f *FSM, index uint64, p *OpenSession) Result {
			r := Result{Index: index}
			r.Status, r.Refusal = f.openSession(p)
			return r
		}})
	registerCommand(CmdCloseSession, command[SessionRef]{name: "close_session",
		get:    func(c Command) *SessionRef { return c.CloseSession },
		wrap:   func(p *SessionRef) Command { return Command{CloseSession: p} },
		encode: binaryEncoder.sessionRef, decode: binaryDecoder.sessionRef,
		apply: status(func(f *FSM, index uint64, p *SessionRef) Status { return f.removeSession(index, p.ID, endClose) })})
	registerCommand(CmdExpireSession, command[SessionRef]{name: "expire_session",
		get:    func(c Command) *SessionRef { return c.ExpireSession },
		wrap:   func(p *SessionRef) Command { return Command{ExpireSession: p} },
		encode: binaryEncoder.sessionRef, decode: binaryDecoder.sessionRef,
		apply: status(func(f *FSM, index uint64, p *SessionRef) Status { return f.removeSession(index, p.ID, endExpire) })})
	registerCommand(CmdAcquire, command[Acquire]{name: "acquire",
		get:  func(c Command) *Acquire { return c.Acquire },
		wrap: func(p *Acquire) Command { return Command{Acquire: p} },
		encode: func(e binaryEncoder, p *Acquire) binaryEncoder {
			e.str(p.Lock)
			e.str(p.Session)
			e.str(p.Holder)
			e.b = append(e.b, byte(p.Mode))
			e.bool(p.Wait)
			e.int(p.WaitFor)
			e.str(p.Value)
			e.limits(p.Limits)
			if e.lockOptions {
				e.uint(p.Permits)
				e.int(p.MaxHold)
			}
			return e
		},
		decode: func(d binaryDecoder) (*Acquire, binaryDecoder) {
			p := &Acquire{Lock: d.str("lock"), Session: d.str("session"), Holder: d.str("holder"),
				Mode: sequencer.Mode(d.byte("mode")), Wait: d.bool("wait"), WaitFor: d.int("wait_for"),
				Value: d.str("value"), Limits: d.limits("limits")}
			if d.lockOptions {
				p.Permits, p.MaxHold = d.uint("permits"), d.int("max_hold")
			}
			return p, d
		},
		apply: (*FSM).acquire})
	registerCommand(CmdRelease, command[LockRef]{name: "release",
		get:    func(c Command) *LockRef { return c.Release },
		wrap:   func(p *LockRef) Command { return Command{Release: p} },
		encode: binaryEncoder.lockRef, decode: binaryDecoder.lockRef,
		apply: status((*FSM).release)})
	registerCommand(CmdCancelWait, command[LockRef]{name: "cancel_wait",
		get:    func(c Command) *LockRef { return c.CancelWait },
		wrap:   func(p *LockRef) Command { return Command{CancelWait: p} },
		encode: binaryEncoder.lockRef, decode: binaryDecoder.lockRef,
		apply: (*FSM).cancelWait})
	registerCommand(CmdEndDelay, command[EndDelay]{name: "end_delay",
		get:  func(c Command) *EndDelay { return c.EndDelay },
		wrap: func(p *EndDelay) Command { return Command{EndDelay: p} },
		encode: func(e binaryEncoder, p *EndDelay) binaryEncoder {
			e.str(p.Lock)
			e.int(p.Until)
			if e.lockOptions {
				e.uint(p.Slot)
			}
			return e
		},
		decode: func(d binaryDecoder) (*EndDelay, binaryDecoder) {
			p := &EndDelay{Lock: d.str("lock"), Until: d.int("until")}
			if d.lockOptions {
				p.Slot = d.uint("slot")
			}
			return p, d
		},
		apply: status((*FSM).endDelay)})
	registerCommand(CmdSetMember, command[Member]{name: "set_member",
		get:  func(c Command) *Member { return c.SetMember },
		wrap: func(p *Member) Command { return Command{SetMember: p} },
		encode: func(e binaryEncoder, p *Member) binaryEncoder {
			e.str(p.ID)
			e.str(p.RaftAddr)
			e.str(p.HTTPAddr)
			e.b = append(e.b, p.Commands)
			return e
		},
		decode: func(d binaryDecoder) (*Member, binaryDecoder) {
			p := &Member{ID: d.str("id"), RaftAddr: d.str("raft_addr"), HTTPAddr: d.str("http_addr"), Commands: d.byte("commands")}
			return p, d
		},
		apply: status((*FSM).setMember)})
	registerCommand(CmdACLBootstrap, command[Token]{name: "acl_bootstrap",
		get:    func(c Command) *Token { return c.ACLBootstrap },
		wrap:   func(p *Token) Command { return Command{ACLBootstrap: p} },
		encode: binaryEncoder.token, decode: binaryDecoder.token,
		apply: status((*FSM).aclBootstrap)})
	registerCommand(CmdCreateToken, command[Token]{name: "create_token",
		get:    func(c Command) *Token { return c.CreateToken },
		wrap:   func(p *Token) Command { return Command{CreateToken: p} },
		encode: binaryEncoder.token, decode: binaryDecoder.token,
		apply: status(func(f *FSM, _ uint64, p *Token) Status { return f.createToken(p) })})
	registerCommand(CmdDeleteToken, command[TokenRef]{name: "delete_token",
		get:  func(c Command) *TokenRef { return c.DeleteToken },
		wrap: func(p *TokenRef) Command { return Command{DeleteToken: p} },
		encode: func(e binaryEncoder, p *TokenRef) binaryEncoder {
			e.str(p.ID)
			return e
		},
		decode: func(d binaryDecoder) (*TokenRef, binaryDecoder) {
			p := &TokenRef{ID: d.str("id")}
			return p, d
		},
		apply: status(func(f *FSM, index uint64, p *TokenRef) Status { return f.deleteToken(index, p.ID) })})
	registerCommand(CmdEndHold, command[EndHold]{name: "end_hold",
		get:  func(c Command) *EndHold { return c.EndHold },
		wrap: func(p *EndHold) Command { return Command{EndHold: p} },
		encode: func(e binaryEncoder, p *EndHold) binaryEncoder {
			e.int(p.Until)
			return e
		},
		decode: func(d binaryDecoder) (*EndHold, binaryDecoder) {
			p := &EndHold{Until: d.int("until")}
			return p, d
		},
		apply: func(f *FSM, index uint64, p *EndHold) Result {
			f.endHold(index, p)
			return Result{Index: index}
		}})
	registerCommand(CmdACLBootstrapReset, command[ACLBootstrapReset]{name: "acl_bootstrap_reset",
		since: VersionTokenLimits,
		get:   func(c Command) *ACLBootstrapReset { return c.ACLBootstrapReset },
		wrap:  func(p *ACLBootstrapReset) Command { return Command{ACLBootstrapReset: p} },
		encode: func(e binaryEncoder, p *ACLBootstrapReset) binaryEncoder {
			e.uint(p.ResetIndex)
			return e.token(&p.Token)
		},
		decode: func(d binaryDecoder) (*ACLBootstrapReset, binaryDecoder) {
			p := &ACLBootstrapReset{ResetIndex: d.uint("reset_index")}
			t, d := d.token()
			p.Token = *t
			return p, d
		},
		apply: status((*FSM).aclBootstrapReset)})
	registerCommand(CmdRevokeGrant, command[RevokeGrant]{name: "revoke_grant",
		since: VersionLockOptions,
		get:   func(c Command) *RevokeGrant { return c.RevokeGrant },
		wrap:  func(p *RevokeGrant) Command { return Command{RevokeGrant: p} },
		encode: func(e binaryEncoder, p *RevokeGrant) binaryEncoder {
			e.str(p.Lock)
			e.str(p.Session)
			e.str(p.Holder)
			e.uint(p.Token)
			e.str(p.Kind)
			e.str(p.Reason)
			e.str(p.By)
			return e
		},
		decode: func(d binaryDecoder) (*RevokeGrant, binaryDecoder) {
			p := &RevokeGrant{Lock: d.str("lock"), Session: d.str("session"), Holder: d.str("holder"),
				Token: d.uint("token"), Kind: d.str("kind"), Reason: d.str("reason"), By: d.str("by")}
			return p, d
		},
		apply: status((*FSM).revoke)})
	registerCommand(CmdRequestRelease, command[RequestRelease]{name: "request_release",
		since: VersionLockOptions,
		get:   func(c Command) *RequestRelease { return c.RequestRelease },
		wrap:  func(p *RequestRelease) Command { return Command{RequestRelease: p} },
		encode: func(e binaryEncoder, p *RequestRelease) binaryEncoder {
			e.str(p.Lock)
			e.str(p.Session)
			e.str(p.Holder)
			return e
		},
		decode: func(d binaryDecoder) (*RequestRelease, binaryDecoder) {
			p := &RequestRelease{Lock: d.str("lock"), Session: d.str("session"), Holder: d.str("holder")}
			return p, d
		},
		apply: status((*FSM).requestRelease)})
	registerCommand(CmdRevokeSession, command[RevokeSession]{name: "revoke_session",
		since: VersionLockOptions,
		get:   func(c Command) *RevokeSession { return c.RevokeSession },
		wrap:  func(p *RevokeSession) Command { return Command{RevokeSession: p} },
		encode: func(e binaryEncoder, p *RevokeSession) binaryEncoder {
			e.str(p.ID)
			e.str(p.Reason)
			e.str(p.By)
			return e
		},
		decode: func(d binaryDecoder) (*RevokeSession, binaryDecoder) {
			p := &RevokeSession{ID: d.str("id"), Reason: d.str("reason"), By: d.str("by")}
			return p, d
		},
		apply: status(func(f *FSM, index uint64, p *RevokeSession) Status {
			if p.ID == "" {
				return StatusInvalid
			}
			return f.removeSession(index, p.ID, endRevoke)
		})})
}

// spec returns the table's entry for t, or an error naming the unknown
// type.
func spec(t CommandType) (*commandSpec, error) {
	s, ok := commands[t]
	if !ok {
		return nil, fmt.Errorf("unknown command type %d", uint8(t))
	}
	return s, nil
}
