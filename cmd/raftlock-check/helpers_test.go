package main

import "testing"

// Builders of hand-made histories. Times are small integers; every
// session has a TTL of ttlT.

const ttlT = 1000

func opOpen(c int, s string, call, ret int64) Op {
	return Op{Client: c, Kind: kindOpen, Session: s, Call: call, Return: ret, Result: resOK, TTL: ttlT}
}

func opKA(c int, s string, call, ret int64, res string) Op {
	return Op{Client: c, Kind: kindKeepAlive, Session: s, Call: call, Return: ret, Result: res, TTL: ttlT}
}

func opAcq(c int, s, h, lock string, call, ret int64, res string, token uint64) Op {
	return Op{Client: c, Kind: kindAcquire, Session: s, Holder: h, Lock: lock, Call: call, Return: ret, Result: res, Token: token}
}

func opWaitAcq(c int, s, h, lock string, call, ret int64, res string, token uint64) Op {
	o := opAcq(c, s, h, lock, call, ret, res, token)
	o.Wait = true
	return o
}

func opRel(c int, s, h, lock string, call, ret int64, res string) Op {
	return Op{Client: c, Kind: kindRelease, Session: s, Holder: h, Lock: lock, Call: call, Return: ret, Result: res, Unlock: true}
}

// cancelOf makes a release the cancel of an abandoned acquire (not sent
// by Lock.Unlock).
func cancelOf(o Op) Op {
	o.Unlock = false
	return o
}

func opRead(c int, lock string, call, ret int64, holders ...holderInfo) Op {
	return Op{Client: c, Kind: kindRead, Lock: lock, Call: call, Return: ret, Result: resOK, Holders: holders}
}

func opClose(c int, s string, call, ret int64, res string) Op {
	return Op{Client: c, Kind: kindClose, Session: s, Call: call, Return: ret, Result: res}
}

func hold(s, h string, token uint64) holderInfo {
	return holderInfo{Session: s, Holder: h, Token: token}
}

func write(c int, s, h, lock string, token uint64, at int64, accepted bool) WriteRec {
	return WriteRec{Client: c, Session: s, Holder: h, Lock: lock, Token: token, At: at, Accepted: accepted}
}

func holdRec(c int, s, h, lock string, token uint64, held, lost int64) HoldRec {
	return HoldRec{Client: c, Session: s, Holder: h, Lock: lock, Token: token, Held: held, Lost: lost}
}

// hist builds a history of two clients (sorting ops by call time, as the
// checker's snapshot does).
func hist(ops ...Op) History {
	h := History{Clients: 3, Ops: ops}
	for i := 1; i < len(h.Ops); i++ {
		for j := i; j > 0 && h.Ops[j].Call < h.Ops[j-1].Call; j-- {
			h.Ops[j], h.Ops[j-1] = h.Ops[j-1], h.Ops[j]
		}
	}
	return h
}

func wantViolations(t *testing.T, what string, vs []Violation, n int) {
	t.Helper()
	if len(vs) != n {
		t.Errorf("%s: %d violations, want %d: %+v", what, len(vs), n, vs)
	}
}
