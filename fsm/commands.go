package fsm

import "fmt"

// The command table: every command type, registered once, with what the
// codec and Apply need of it. Adding a command is one registerCommand
// call (and its Cmd value, its payload type and field in Command); no
// switch elsewhere names the types. Consul's fsm.registerCommand is the
// model.

// commandSpec is what the state machine knows of one command type.
type commandSpec struct {
	// name is CommandType.String's answer.
	name string
	// since is the first format version that carries the type: a leader
	// never writes it in an older one (a replica that reads no more would
	// halt on it).
	since byte
	// payload returns c's payload of this type as an any, and whether it
	// is set; alloc sets a fresh one in c and returns it (to decode JSON
	// into).
	payload func(c *Command) (any, bool)
	alloc   func(c *Command) any
	// encode appends the payload's fields in the binary format; decode
	// reads them into c (the first error sticks in d).
	encode func(e *binaryEncoder, c *Command)
	decode func(d *binaryDecoder, c *Command)
	// apply applies the command at index, with f.mu held; r carries the
	// index.
	apply func(f *FSM, index uint64, c *Command) Result
}

// commands is the table, by type. Values of CommandType are part of the
// log format: never renumber.
var commands = map[CommandType]*commandSpec{}

// registerCommand records the type t: name, the field of Command that
// holds its payload, the payload's binary fields both ways, and the
// function that applies it. It is called once per type, from init.
func registerCommand[P any](t CommandType, name string, field func(*Command) **P,
	encode func(*binaryEncoder, *P), decode func(*binaryDecoder) *P, apply func(*FSM, uint64, *P) Result) {
	if _, dup := commands[t]; dup {
		panic(fmt.Sprintf("fsm: command type %d registered twice", uint8(t)))
	}
	commands[t] = &commandSpec{
		name:  name,
		since: VersionUnchecked,
		payload: func(c *Command) (any, bool) {
			p := *field(c)
			return p, p != nil
		},
		alloc: func(c *Command) any {
			p := new(P)
			*field(c) = p
			return p
		},
		encode: func(e *binaryEncoder, c *Command) { encode(e, *field(c)) },
		decode: func(d *binaryDecoder, c *Command) { *field(c) = decode(d) },
		apply: func(f *FSM, index uint64, c *Command) Result {
			p := *field(c)
			if p == nil {
				return Result{Index: index, Status: StatusInvalid}
			}
			return apply(f, index, p)
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
	registerCommand(CmdOpenSession, "open_session", func(c *Command) **OpenSession { return &c.OpenSession },
		func(e *binaryEncoder, p *OpenSession) {
			e.str(p.ID)
			e.str(p.Name)
			e.int(p.TTL)
			e.int(p.LockDelay)
			e.limits(p.Limits)
			e.str(p.Owner)
		},
		func(d *binaryDecoder) *OpenSession {
			return &OpenSession{ID: d.str("id"), Name: d.str("name"), TTL: d.int("ttl"),
				LockDelay: d.int("lock_delay"), Limits: d.limits("limits"), Owner: d.str("owner")}
		},
		func(f *FSM, index uint64, p *OpenSession) Result {
			r := Result{Index: index}
			r.Status, r.Refusal = f.openSession(p)
			return r
		})
	registerCommand(CmdCloseSession, "close_session", func(c *Command) **SessionRef { return &c.CloseSession },
		(*binaryEncoder).sessionRef, (*binaryDecoder).sessionRef,
		status(func(f *FSM, index uint64, p *SessionRef) Status { return f.removeSession(index, p.ID, endClose) }))
	registerCommand(CmdExpireSession, "expire_session", func(c *Command) **SessionRef { return &c.ExpireSession },
		(*binaryEncoder).sessionRef, (*binaryDecoder).sessionRef,
		status(func(f *FSM, index uint64, p *SessionRef) Status { return f.removeSession(index, p.ID, endExpire) }))
	registerCommand(CmdAcquire, "acquire", func(c *Command) **Acquire { return &c.Acquire },
		func(e *binaryEncoder, p *Acquire) {
			e.str(p.Lock)
			e.str(p.Session)
			e.str(p.Holder)
			e.b = append(e.b, byte(p.Mode))
			e.bool(p.Wait)
			e.int(p.WaitFor)
			e.str(p.Value)
			e.limits(p.Limits)
		},
		(*binaryDecoder).acquire, (*FSM).acquire)
	registerCommand(CmdRelease, "release", func(c *Command) **LockRef { return &c.Release },
		(*binaryEncoder).lockRef, (*binaryDecoder).lockRef, status((*FSM).release))
	registerCommand(CmdCancelWait, "cancel_wait", func(c *Command) **LockRef { return &c.CancelWait },
		(*binaryEncoder).lockRef, (*binaryDecoder).lockRef, (*FSM).cancelWait)
	registerCommand(CmdEndDelay, "end_delay", func(c *Command) **EndDelay { return &c.EndDelay },
		func(e *binaryEncoder, p *EndDelay) {
			e.str(p.Lock)
			e.int(p.Until)
		},
		func(d *binaryDecoder) *EndDelay { return &EndDelay{Lock: d.str("lock"), Until: d.int("until")} },
		status((*FSM).endDelay))
	registerCommand(CmdSetMember, "set_member", func(c *Command) **Member { return &c.SetMember },
		func(e *binaryEncoder, p *Member) {
			e.str(p.ID)
			e.str(p.RaftAddr)
			e.str(p.HTTPAddr)
			e.b = append(e.b, p.Commands)
		},
		func(d *binaryDecoder) *Member {
			return &Member{ID: d.str("id"), RaftAddr: d.str("raft_addr"), HTTPAddr: d.str("http_addr"), Commands: d.byte("commands")}
		},
		status((*FSM).setMember))
	registerCommand(CmdACLBootstrap, "acl_bootstrap", func(c *Command) **Token { return &c.ACLBootstrap },
		(*binaryEncoder).token, (*binaryDecoder).token, status((*FSM).aclBootstrap))
	registerCommand(CmdCreateToken, "create_token", func(c *Command) **Token { return &c.CreateToken },
		(*binaryEncoder).token, (*binaryDecoder).token,
		status(func(f *FSM, _ uint64, p *Token) Status { return f.createToken(p) }))
	registerCommand(CmdDeleteToken, "delete_token", func(c *Command) **TokenRef { return &c.DeleteToken },
		func(e *binaryEncoder, p *TokenRef) { e.str(p.ID) },
		func(d *binaryDecoder) *TokenRef { return &TokenRef{ID: d.str("id")} },
		status(func(f *FSM, index uint64, p *TokenRef) Status { return f.deleteToken(index, p.ID) }))
	registerCommand(CmdEndHold, "end_hold", func(c *Command) **EndHold { return &c.EndHold },
		func(e *binaryEncoder, p *EndHold) { e.int(p.Until) },
		func(d *binaryDecoder) *EndHold { return &EndHold{Until: d.int("until")} },
		func(f *FSM, index uint64, p *EndHold) Result {
			f.endHold(index, p)
			return Result{Index: index}
		})
	registerCommand(CmdACLBootstrapReset, "acl_bootstrap_reset", func(c *Command) **ACLBootstrapReset { return &c.ACLBootstrapReset },
		func(e *binaryEncoder, p *ACLBootstrapReset) {
			e.uint(p.ResetIndex)
			e.token(&p.Token)
		},
		func(d *binaryDecoder) *ACLBootstrapReset {
			r := &ACLBootstrapReset{ResetIndex: d.uint("reset_index")}
			r.Token = *d.token()
			return r
		},
		status((*FSM).aclBootstrapReset))
	commands[CmdACLBootstrapReset].since = VersionTokenLimits
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
