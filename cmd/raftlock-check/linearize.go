package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// modelOps turns a history into the operations of the lock model: every
// acquire and release, every read that answered, and per session the
// synthetic operation that frees its locks (an acknowledged close, or else
// an expiry from the last moment it was known alive to the first moment it
// was known gone, or for ever), and per lock one restore for each restore
// into the running cluster (see lockState.Wild). An acquire or release whose outcome is
// unknown may take effect at any moment after its call: it becomes an arm
// at its call, which lets its pendingEffect happen later. Client operations
// get lane Client, the synthetic ones lane Clients+Client.
func modelOps(h History) []porcupine.Operation {
	var ops []porcupine.Operation
	add := func(lane int, in lockInput, out lockOutput, call, ret int64, meta string) {
		ops = append(ops, porcupine.Operation{ClientId: lane, Input: in, Output: out, Call: call, Return: ret, Metadata: meta})
	}
	for _, o := range h.Ops {
		in := lockInput{Kind: o.Kind, Lock: o.Lock, Session: o.Session, Holder: o.Holder, Wait: o.Wait, Unlock: o.Unlock}
		out := lockOutput{Result: o.Result, Token: o.Token, Holders: o.Holders}
		meta := fmt.Sprintf("client %d op %d: %s", o.Client, o.ID, o.Err)
		switch o.Kind {
		case kindAcquire, kindRelease:
			if at := o.limitAt(); o.Kind == kindAcquire && at != pending && (o.Result == resOK || o.Result == resUnknown) {
				// The cluster may revoke the grant at its hold limit at
				// any moment from then on.
				add(h.Clients+o.Client, armOf(in, kindMaxHold), lockOutput{Result: resOK}, at, at, meta+" (its hold limit)")
			}
			if o.Result == resUnknown {
				// It may take effect after the client gave up on it.
				add(o.Client, armOf(in, o.Kind), out, o.Call, o.Call, meta)
				continue
			}
			add(o.Client, in, out, o.Call, o.Return, meta)
		case kindRead:
			if o.Result == resOK && o.Done() {
				add(o.Client, in, out, o.Call, o.Return, meta)
			}
		}
	}
	// Every restore, on every lock: lane 2*Clients (restores are made one
	// at a time).
	locks := map[string]bool{}
	for _, o := range h.Ops {
		if o.Lock != "" {
			locks[o.Lock] = true
		}
	}
	for _, r := range restoresOf(h) {
		for _, l := range slices.Sorted(maps.Keys(locks)) {
			add(2*h.Clients, lockInput{Kind: kindRestore, Lock: l}, lockOutput{Result: resOK}, r.from, r.to, "restore")
		}
	}
	// Every revocation of a grant: lane 2*Clients+1 (made one at a time).
	for _, f := range h.Faults {
		if (f.Kind == faultRevokeGrant || f.Kind == faultLateAnswer) && f.ActCall != 0 {
			add(2*h.Clients+1, lockInput{Kind: kindRevoke, Lock: f.Lock, Token: f.Token}, lockOutput{Result: resOK}, f.ActCall, f.ActReturn, "revoke")
		}
	}
	ss := sessionsOf(h)
	for _, id := range slices.Sorted(maps.Keys(ss)) {
		f := ss[id]
		for _, l := range slices.Sorted(maps.Keys(f.Locks)) {
			in := lockInput{Lock: l, Session: id}
			if f.ClosedOK {
				for _, o := range h.Ops {
					if o.Kind == kindClose && o.Session == id && o.Result == resOK {
						in.Kind = kindClose
						add(h.Clients+f.Client, in, lockOutput{Result: resOK}, o.Call, o.Return, "close")
						break
					}
				}
				continue
			}
			in.Kind = kindExpire
			call := f.LastAlive()
			if f.GoneAt < call {
				// Answered after it was reported gone: check 4 reports it;
				// the model takes the earlier moment.
				call = f.GoneAt
			}
			add(h.Clients+f.Client, in, lockOutput{Result: resOK}, call, f.GoneAt,
				fmt.Sprintf("session of client %d: last known alive, then gone (%s)", f.Client, f.GoneKind))
		}
	}
	return ops
}

// armOf returns the arm of the operation in (of kind effect), whose
// outcome is unknown.
func armOf(in lockInput, effect string) lockInput {
	in.Kind, in.Effect = kindArm, effect
	return in
}

// linearizability is the outcome of the porcupine check.
type linearizability struct {
	Result     porcupine.CheckResult
	Ops        int
	Partitions int
	// Unknown counts the client operations whose outcome is unknown (the
	// arms of their pendingEffect).
	Unknown int
	Elapsed time.Duration
	// Timeout is the time porcupine was given.
	Timeout time.Duration
	// Illegal names the locks whose history is not linearizable.
	Illegal []string
	// NotRun says why the check was not run (a semaphore run); Result is
	// then Ok, and means nothing.
	NotRun string
	// Explained says, per lock in Illegal, where its history stops
	// linearizing (explainIllegal).
	Explained []string
	info      porcupine.LinearizationInfo
	model     porcupine.Model
}

// runPorcupine checks every lock's history against the lock model,
// giving up (Unknown) after timeout.
func runPorcupine(h History, timeout time.Duration) linearizability {
	ops := modelOps(h)
	model := lockModel()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	out := linearizability{Result: res, Ops: len(ops), Partitions: len(partitionByLock(ops)),
		Elapsed: time.Since(start), Timeout: timeout, info: info, model: model}
	for _, op := range ops {
		if op.Input.(lockInput).Kind == kindArm {
			out.Unknown++
		}
	}
	if res == porcupine.Illegal {
		for _, part := range partitionByLock(ops) {
			if porcupine.CheckOperationsTimeout(model, part, timeout) == porcupine.Illegal {
				out.Illegal = append(out.Illegal, part[0].Input.(lockInput).Lock)
				out.Explained = append(out.Explained, explainIllegal(model, part, timeout))
			}
		}
	}
	return out
}

// visualize writes the porcupine visualisation of the check to path, with
// the faults and the violations found by the other checks as annotations.
func (l linearizability) visualize(path string, h History, notes []porcupine.Annotation) error {
	info := l.info
	var anns []porcupine.Annotation
	for _, f := range h.Faults {
		anns = append(anns, porcupine.Annotation{Tag: "faults", Start: f.Start, End: f.End,
			Description: f.Kind + " " + f.Target, Details: f.Note, BackgroundColor: "#fde2b8"})
	}
	info.AddAnnotations(append(anns, notes...))
	if err := porcupine.VisualizePath(l.model, info, path); err != nil {
		return fmt.Errorf("visualize: %w", err)
	}
	return nil
}

// explainIllegal says where the history of one lock (part, its
// operations) stops linearizing, for a report that must stand on its own
// (a CI log, where the history file is gone): the last operations of the
// longest partial linearization porcupine found, with the state they
// leave, and the earliest operations it could not place after them.
func explainIllegal(model porcupine.Model, part []porcupine.Operation, timeout time.Duration) string {
	if len(part) == 0 {
		return ""
	}
	_, info := porcupine.CheckOperationsVerbose(model, part, timeout)
	// Indices into part (one partition: part is one lock's).
	var longest []int
	for _, p := range info.PartialLinearizations() {
		for _, lin := range p {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	t0 := part[0].Call
	for _, op := range part {
		t0 = min(t0, op.Call)
	}
	at := func(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns-t0)/1e9) }
	line := func(op porcupine.Operation) string {
		return fmt.Sprintf("    [%s, %s] lane %d: %s", at(op.Call), at(op.Return), op.ClientId, model.DescribeOperation(op.Input, op.Output))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the longest linearization places %d of %d operations; its last ones:\n", len(longest), len(part))
	state := model.Init()
	placed := make([]bool, len(part))
	for i, k := range longest {
		if k < 0 || k >= len(part) {
			continue
		}
		op := part[k]
		placed[k] = true
		_, state = model.Step(state, op.Input, op.Output)
		if i >= len(longest)-8 {
			b.WriteString(line(op) + "\n")
		}
	}
	fmt.Fprintf(&b, "  leaving the lock %s; the earliest operations not placed:\n", model.DescribeState(state))
	var rest []porcupine.Operation
	for k, op := range part {
		if !placed[k] {
			rest = append(rest, op)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
	for i, op := range rest {
		if i == 8 {
			fmt.Fprintf(&b, "    (%d more)\n", len(rest)-8)
			break
		}
		b.WriteString(line(op) + "\n")
	}
	return b.String()
}
