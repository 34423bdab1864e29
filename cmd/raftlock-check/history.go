package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/raftlock/raftlock/api"
)

// pending is the Return of an operation that never returned: it may take
// effect at any time after its call.
const pending = math.MaxInt64

// Op is one operation of a client, as the client recorded it: its call and
// return times (Return is pending if it never returned) and its outcome.
type Op struct {
	Client int    `json:"client"`
	ID     uint64 `json:"id"`
	Kind   string `json:"kind"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`

	Lock    string `json:"lock,omitempty"`
	Session string `json:"session,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Wait    bool   `json:"wait,omitempty"`
	// WaitFor is a waiting acquire's wait in nanoseconds (0: not known).
	WaitFor int64 `json:"wait_for,omitempty"`
	Unlock  bool  `json:"unlock,omitempty"`
	Verify  bool  `json:"verify,omitempty"`
	// Naive: a call of the naive waiter (one HTTP request, no retries).
	Naive bool   `json:"naive,omitempty"`
	Node  string `json:"node,omitempty"`
	// Attempts counts the HTTP requests the call sent (0: not counted);
	// Unsure those of them that may have taken effect unseen.
	Attempts int `json:"attempts,omitempty"`
	Unsure   int `json:"unsure,omitempty"`

	Result    string       `json:"result"`
	Err       string       `json:"err,omitempty"`
	Token     uint64       `json:"token,omitempty"`
	TTL       int64        `json:"ttl,omitempty"`
	LockDelay int64        `json:"lock_delay,omitempty"`
	Holders   []holderInfo `json:"holders,omitempty"`
	// Queue and Index: a read's queue of waiters (FIFO order) and the
	// Raft index of the lock's last change it saw.
	Queue []queuedInfo `json:"queue,omitempty"`
	Index uint64       `json:"index,omitempty"`
	// Slot is the semaphore slot an acquire was granted (--permits).
	Slot uint64 `json:"slot,omitempty"`
	// Mode ("shared", or empty: exclusive) and Permits (0: a plain lock)
	// are an acquire's kind.
	Mode    string `json:"mode,omitempty"`
	Permits uint64 `json:"permits,omitempty"`
	// MaxHold is an acquire's hold limit in nanoseconds (0: none): the
	// cluster revokes the grant that long after it (kind max_hold).
	MaxHold int64 `json:"max_hold,omitempty"`
}

// limitAt is the earliest moment the cluster may revoke an acquire's
// grant at its hold limit (pending: no limit): its call plus the limit,
// less the 1% the client takes off for clock rates.
func (o Op) limitAt() int64 {
	if o.MaxHold <= 0 {
		return pending
	}
	return o.Call + o.MaxHold - o.MaxHold/100
}

// Done reports whether the operation returned.
func (o Op) Done() bool { return o.Return != pending }

// WriteRec is one write offered to the fenced resource, stamped with the
// checker's clock when the resource decided.
type WriteRec struct {
	Client   int    `json:"client"`
	Lock     string `json:"lock"`
	Session  string `json:"session"`
	Holder   string `json:"holder"`
	Token    uint64 `json:"token"`
	At       int64  `json:"at"`
	Accepted bool   `json:"accepted"`
	Err      string `json:"err,omitempty"`
	// Semaphore: the write's sequencer named a semaphore slot, Slot.
	Semaphore bool   `json:"semaphore,omitempty"`
	Slot      uint64 `json:"slot,omitempty"`
}

// FaultRec is one injected fault: what, on whom, from Start to End (the
// heal).
type FaultRec struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	// LeaderLoss: the fault took the leader away (killed, paused,
	// isolated, or left in a minority).
	LeaderLoss bool   `json:"leader_loss,omitempty"`
	Note       string `json:"note,omitempty"`
	// Lock and Token: the grant the target client held (pause-client,
	// partition-client).
	Lock  string `json:"lock,omitempty"`
	Token uint64 `json:"token,omitempty"`
	// Clients: the clients whose last request had gone to the target node
	// when it froze (freeze-node); Asked how many clients answered.
	Clients []int `json:"clients,omitempty"`
	Asked   int   `json:"asked,omitempty"`
	// ActCall and ActReturn: an operator action's request (restore,
	// delete-token), from its call to its answer (pending: outcome
	// unknown); 0 for the other faults. See revoked.
	ActCall   int64 `json:"act_call,omitempty"`
	ActReturn int64 `json:"act_return,omitempty"`
}

// ExpiryRec is a session its client declared expired (its Expired event):
// jeopardy outlasted the grace period, or the cluster answered that the
// session was gone.
type ExpiryRec struct {
	Client  int    `json:"client"`
	Session string `json:"session"`
	At      int64  `json:"at"`
	Err     string `json:"err,omitempty"`
}

// HoldRec is one grant a client worked under, as it reported it: from
// Held (its msgHold, stamped when it had the lock's handle) until its
// Lost() channel closed (Lost, stamped by the client's msgLost; pending
// if the client never reported it).
type HoldRec struct {
	Client  int    `json:"client"`
	Lock    string `json:"lock"`
	Session string `json:"session"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	Held    int64  `json:"held"`
	Lost    int64  `json:"lost"`
	// Slot is the held grant's semaphore slot (--permits).
	Slot uint64 `json:"slot,omitempty"`
}

// History is everything a run recorded.
type History struct {
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	Clients int   `json:"clients"`
	// Exited holds, per client, when the checker saw its output end (its
	// process exited); pending, or no entry, while it ran.
	Exited []int64 `json:"exited,omitempty"`
	// Workers are the clients that drove the workload through a
	// conformance worker (--worker-clients), Worker its command line.
	Workers []int    `json:"workers,omitempty"`
	Worker  []string `json:"worker,omitempty"`
	// Permits is the run's --permits: above 0, every lock is a
	// semaphore of that many slots (semaphore.go).
	Permits int `json:"permits,omitempty"`
	// Mixed: a run with --mixed-kinds (mixed.go).
	Mixed  bool       `json:"mixed,omitempty"`
	Ops    []Op       `json:"-"`
	Writes []WriteRec `json:"-"`
	Faults []FaultRec `json:"-"`
	Holds  []HoldRec  `json:"-"`
	// Expiries are the sessions their clients declared expired.
	Expiries []ExpiryRec `json:"-"`
	// Watches are the answers of the checker's prefix watcher
	// (prefixwatch.go), in order.
	Watches []WatchRec `json:"-"`
	// Execs are the exec holders' exec processes (exec.go).
	Execs []ExecRec `json:"-"`
}

// exitOf returns when client's process ended (pending: it still ran when
// the history ended, or it is not known).
func (h History) exitOf(client int) int64 {
	if client < 0 || client >= len(h.Exited) {
		return pending
	}
	return h.Exited[client]
}

// historyLog collects a run's history as messages arrive. It is safe for
// concurrent use.
type historyLog struct {
	mu     sync.Mutex
	ops    []Op
	open   map[[2]uint64]int // (client, op id) -> index in ops
	writes []WriteRec
	faults []FaultRec
	// active is the fault being injected now, if it was recorded at its
	// start (End pending until addFault records it whole).
	active *FaultRec
	holds  []HoldRec
	// held indexes holds by client and holder id.
	held     map[holdKey]int
	exits    map[int]int64
	expiries []ExpiryRec
	watches  []WatchRec
	// permits is the run's --permits (History.Permits); mixed its
	// --mixed-kinds (History.Mixed).
	permits int
	mixed   bool
}

// holdKey names one hold of a client.
type holdKey struct {
	client int
	holder string
}

func newHistoryLog() *historyLog {
	return &historyLog{open: make(map[[2]uint64]int), held: map[holdKey]int{}, exits: map[int]int64{}}
}

// record adds a call or completes an operation. It returns the completed
// operation for msgRet (ok false for an unknown id).
func (h *historyLog) record(client int, m message) (Op, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := [2]uint64{uint64(client), m.ID}
	switch m.T {
	case msgCall:
		h.open[key] = len(h.ops)
		h.ops = append(h.ops, Op{Client: client, ID: m.ID, Kind: m.Kind, Call: m.At, Return: pending,
			Lock: m.Lock, Session: m.Session, Holder: m.Holder, Wait: m.Wait, WaitFor: m.WaitFor, Unlock: m.Unlock,
			Verify: m.Verify, Naive: m.Naive, Node: m.Node, Mode: m.Mode, Permits: m.Permits, MaxHold: m.MaxHold, Result: resUnknown})
		return Op{}, false
	case msgRet:
		i, ok := h.open[key]
		if !ok {
			return Op{}, false
		}
		delete(h.open, key)
		o := &h.ops[i]
		o.Return = m.At
		o.Result, o.Err, o.Token, o.TTL, o.LockDelay, o.Holders = m.Result, m.Err, m.Token, m.TTL, m.LockDelay, m.Holders
		o.Queue, o.Index, o.Attempts, o.Unsure, o.Slot = m.Queue, m.Index, m.Attempts, m.Unsure, m.Slot
		if m.Session != "" {
			o.Session = m.Session
		}
		return *o, true
	}
	return Op{}, false
}

func (h *historyLog) addWrite(w WriteRec) {
	h.mu.Lock()
	h.writes = append(h.writes, w)
	h.mu.Unlock()
}

// addFault records an injected fault; it replaces the fault begun with
// beginFault, if any.
func (h *historyLog) addFault(f FaultRec) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.active = nil
	h.mu.Unlock()
}

// beginFault records a fault at its start, with End pending until
// addFault (or dropFault) replaces it: snapshots taken meanwhile see it.
func (h *historyLog) beginFault(f FaultRec) {
	f.End = pending
	h.mu.Lock()
	h.active = &f
	h.mu.Unlock()
}

// dropFault forgets the fault begun with beginFault (it was not injected).
func (h *historyLog) dropFault() {
	h.mu.Lock()
	h.active = nil
	h.mu.Unlock()
}

// addHold records a client's msgHold.
func (h *historyLog) addHold(client int, m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[holdKey{client, m.Holder}] = len(h.holds)
	h.holds = append(h.holds, HoldRec{Client: client, Lock: m.Lock, Session: m.Session, Holder: m.Holder,
		Token: m.Token, Held: m.At, Lost: pending, Slot: m.Slot})
}

// lost records a client's msgLost: the Lost() of its hold closed.
func (h *historyLog) lost(client int, m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, ok := h.held[holdKey{client, m.Holder}]; ok && h.holds[i].Lost == pending {
		h.holds[i].Lost = m.At
	}
}

// expired records a client's msgState that declared its session m.Session
// expired.
func (h *historyLog) expired(client int, m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expiries = append(h.expiries, ExpiryRec{Client: client, Session: m.Session, At: m.At, Err: m.Err})
}

// clientExited records the end of a client's process.
func (h *historyLog) clientExited(client int, at int64) {
	h.mu.Lock()
	h.exits[client] = at
	h.mu.Unlock()
}

// snapshot returns a copy of the history so far.
func (h *historyLog) snapshot(start, end int64, clients int) History {
	h.mu.Lock()
	defer h.mu.Unlock()
	hist := History{Start: start, End: end, Clients: clients, Permits: h.permits, Mixed: h.mixed,
		Ops:    append([]Op(nil), h.ops...),
		Writes: append([]WriteRec(nil), h.writes...),
		Faults: append([]FaultRec(nil), h.faults...),
		Holds:  append([]HoldRec(nil), h.holds...), Expiries: append([]ExpiryRec(nil), h.expiries...)}
	hist.Watches = append([]WatchRec(nil), h.watches...)
	if h.active != nil {
		hist.Faults = append(hist.Faults, *h.active)
	}
	if len(h.exits) > 0 {
		hist.Exited = make([]int64, clients)
		for c := range hist.Exited {
			hist.Exited[c] = pending
			if t, ok := h.exits[c]; ok {
				hist.Exited[c] = t
			}
		}
	}
	resolveHolders(hist.Ops)
	sort.SliceStable(hist.Ops, func(i, j int) bool { return hist.Ops[i].Call < hist.Ops[j].Call })
	sort.SliceStable(hist.Writes, func(i, j int) bool { return hist.Writes[i].At < hist.Writes[j].At })
	sort.SliceStable(hist.Holds, func(i, j int) bool { return hist.Holds[i].Held < hist.Holds[j].Held })
	sort.SliceStable(hist.Expiries, func(i, j int) bool { return hist.Expiries[i].At < hist.Expiries[j].At })
	return hist
}

// unknownSession prefixes the handle of a holder's session that none of
// the clients opened (as far as the history knows) in holderInfo.Session.
const unknownSession = "handle:"

// resolveHolders names the holders that reads saw by session id: a read
// answer names a holder's session by its handle only, and the history knows
// the id of every session its clients opened. A handle it cannot resolve
// stays a session of its own, unknownSession + handle. Ops' holder slices
// are copied, never changed in place.
func resolveHolders(ops []Op) {
	ids := map[string]string{}
	for _, o := range ops {
		if o.Kind == kindOpen && o.Session != "" {
			ids[api.SessionHandle(o.Session)] = o.Session
		}
	}
	for i := range ops {
		if !slices.ContainsFunc(ops[i].Holders, func(h holderInfo) bool { return h.Handle != "" }) {
			continue
		}
		hs := slices.Clone(ops[i].Holders)
		for j, h := range hs {
			if h.Handle == "" {
				continue
			}
			id, ok := ids[h.Handle]
			if !ok {
				id = unknownSession + h.Handle
			}
			hs[j].Session, hs[j].Handle = id, ""
		}
		ops[i].Holders = hs
	}
}

// historyLine is one line of a history file.
type historyLine struct {
	Type  string    `json:"type"`
	Op    *Op       `json:"op,omitempty"`
	Write *WriteRec `json:"write,omitempty"`
	Fault *FaultRec `json:"fault,omitempty"`
	Hold  *HoldRec  `json:"hold,omitempty"`
	// Expiry: a session its client declared expired.
	Expiry *ExpiryRec `json:"expiry,omitempty"`
	// Watch: an answer of the prefix watcher.
	Watch *WatchRec `json:"watch,omitempty"`
	Meta  *History  `json:"meta,omitempty"`
	// Exec: an exec holder's exec process.
	Exec *ExecRec `json:"exec,omitempty"`
}

// writeHistory writes h to path as JSON lines: a "meta" line, then every
// operation, write, fault, hold and client-declared expiry. Times are CLOCK_MONOTONIC
// nanoseconds; 9223372036854775807 means never (an operation that never
// returned, a Lost() never reported closed, a client still running).
func writeHistory(path string, h History) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	lines := []historyLine{{Type: "meta", Meta: &h}}
	for i := range h.Ops {
		lines = append(lines, historyLine{Type: "op", Op: &h.Ops[i]})
	}
	for i := range h.Writes {
		lines = append(lines, historyLine{Type: "write", Write: &h.Writes[i]})
	}
	for i := range h.Faults {
		lines = append(lines, historyLine{Type: "fault", Fault: &h.Faults[i]})
	}
	for i := range h.Holds {
		lines = append(lines, historyLine{Type: "hold", Hold: &h.Holds[i]})
	}
	for i := range h.Expiries {
		lines = append(lines, historyLine{Type: "expiry", Expiry: &h.Expiries[i]})
	}
	for i := range h.Watches {
		lines = append(lines, historyLine{Type: "watch", Watch: &h.Watches[i]})
	}
	for i := range h.Execs {
		lines = append(lines, historyLine{Type: "exec", Exec: &h.Execs[i]})
	}
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			f.Close()
			return fmt.Errorf("write history %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write history %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write history %s: %w", path, err)
	}
	return nil
}

// readHistory reads a file written by writeHistory.
func readHistory(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return History{}, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	var h History
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var l historyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return History{}, fmt.Errorf("read history %s: %w", path, err)
		}
		switch {
		case l.Meta != nil:
			h.Start, h.End, h.Clients, h.Exited = l.Meta.Start, l.Meta.End, l.Meta.Clients, l.Meta.Exited
			h.Workers, h.Worker, h.Permits, h.Mixed = l.Meta.Workers, l.Meta.Worker, l.Meta.Permits, l.Meta.Mixed
		case l.Op != nil:
			h.Ops = append(h.Ops, *l.Op)
		case l.Write != nil:
			h.Writes = append(h.Writes, *l.Write)
		case l.Fault != nil:
			h.Faults = append(h.Faults, *l.Fault)
		case l.Hold != nil:
			h.Holds = append(h.Holds, *l.Hold)
		case l.Expiry != nil:
			h.Expiries = append(h.Expiries, *l.Expiry)
		case l.Watch != nil:
			h.Watches = append(h.Watches, *l.Watch)
		case l.Exec != nil:
			h.Execs = append(h.Execs, *l.Exec)
		}
	}
	if err := sc.Err(); err != nil {
		return History{}, fmt.Errorf("read history %s: %w", path, err)
	}
	return h, nil
}
