package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
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
	Unlock  bool   `json:"unlock,omitempty"`
	Verify  bool   `json:"verify,omitempty"`
	Node    string `json:"node,omitempty"`

	Result    string       `json:"result"`
	Err       string       `json:"err,omitempty"`
	Token     uint64       `json:"token,omitempty"`
	TTL       int64        `json:"ttl,omitempty"`
	LockDelay int64        `json:"lock_delay,omitempty"`
	Holders   []holderInfo `json:"holders,omitempty"`
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
}

// History is everything a run recorded.
type History struct {
	Start   int64      `json:"start"`
	End     int64      `json:"end"`
	Clients int        `json:"clients"`
	Ops     []Op       `json:"-"`
	Writes  []WriteRec `json:"-"`
	Faults  []FaultRec `json:"-"`
}

// historyLog collects a run's history as messages arrive. It is safe for
// concurrent use.
type historyLog struct {
	mu     sync.Mutex
	ops    []Op
	open   map[[2]uint64]int // (client, op id) -> index in ops
	writes []WriteRec
	faults []FaultRec
}

func newHistoryLog() *historyLog {
	return &historyLog{open: make(map[[2]uint64]int)}
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
			Lock: m.Lock, Session: m.Session, Holder: m.Holder, Wait: m.Wait, Unlock: m.Unlock,
			Verify: m.Verify, Node: m.Node, Result: resUnknown})
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

func (h *historyLog) addFault(f FaultRec) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

// snapshot returns a copy of the history so far.
func (h *historyLog) snapshot(start, end int64, clients int) History {
	h.mu.Lock()
	defer h.mu.Unlock()
	hist := History{Start: start, End: end, Clients: clients,
		Ops:    append([]Op(nil), h.ops...),
		Writes: append([]WriteRec(nil), h.writes...),
		Faults: append([]FaultRec(nil), h.faults...)}
	sort.SliceStable(hist.Ops, func(i, j int) bool { return hist.Ops[i].Call < hist.Ops[j].Call })
	sort.SliceStable(hist.Writes, func(i, j int) bool { return hist.Writes[i].At < hist.Writes[j].At })
	return hist
}

// historyLine is one line of a history file.
type historyLine struct {
	Type  string    `json:"type"`
	Op    *Op       `json:"op,omitempty"`
	Write *WriteRec `json:"write,omitempty"`
	Fault *FaultRec `json:"fault,omitempty"`
	Meta  *History  `json:"meta,omitempty"`
}

// writeHistory writes h to path as JSON lines: a "meta" line, then every
// operation, write and fault. Times are CLOCK_MONOTONIC nanoseconds; a
// Return of 9223372036854775807 means the operation never returned.
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
			h.Start, h.End, h.Clients = l.Meta.Start, l.Meta.End, l.Meta.Clients
		case l.Op != nil:
			h.Ops = append(h.Ops, *l.Op)
		case l.Write != nil:
			h.Writes = append(h.Writes, *l.Write)
		case l.Fault != nil:
			h.Faults = append(h.Faults, *l.Fault)
		}
	}
	if err := sc.Err(); err != nil {
		return History{}, fmt.Errorf("read history %s: %w", path, err)
	}
	return h, nil
}
