package main

import (
	"fmt"
	"sort"
	"time"
)

// A failed run must stand on its own in a CI log, where its directory is
// gone with the machine: the report names the seed (Report.Seed, in the
// setup line and in the rerun line) and, besides porcupine's explanation
// of a non-linearizable lock (explainIllegal), lists what the history
// holds around the first violation of another check (aroundFirst).

// aroundBefore and aroundAfter bound the window of aroundFirst, and
// aroundMax the lines it lists.
const (
	aroundBefore = 3 * time.Second
	aroundAfter  = time.Second
	aroundMax    = 40
)

// aroundFirst lists, for the first violation of vs that is not the
// linearizability check's, the operations of h that overlap the window
// [At − aroundBefore, At + aroundAfter] and are either its client's or
// grants, releases and writes of anyone, plus the faults that overlap it:
// one line each, in time order, counted from h.Start. It returns nil if
// there is no such violation.
func aroundFirst(h History, vs []Violation) []string {
	var first *Violation
	for i := range vs {
		if vs[i].Check != checkLinearizable && (first == nil || vs[i].At < first.At) {
			first = &vs[i]
		}
	}
	if first == nil {
		return nil
	}
	from, to := first.At-int64(aroundBefore), first.At+int64(aroundAfter)
	at := func(ns int64) string {
		if ns == pending {
			return "never"
		}
		return fmt.Sprintf("%.3fs", float64(ns-h.Start)/1e9)
	}
	type line struct {
		t    int64
		text string
	}
	var lines []line
	for _, o := range h.Ops {
		if o.Call > to || o.Return < from {
			continue
		}
		mine := o.Client == first.Client
		if !mine && !(o.Kind == kindAcquire && o.Result == resOK) && o.Kind != kindRelease {
			continue
		}
		s := fmt.Sprintf("[%s, %s] client %d %s %s", at(o.Call), at(o.Return), o.Client, o.Kind, o.Lock)
		if o.Token != 0 {
			s += fmt.Sprintf(" token %d", o.Token)
		}
		switch {
		case o.Kind == kindAcquire && o.Permits > 0:
			s += fmt.Sprintf(" of %d permits", o.Permits)
			if o.Result == resOK {
				s += fmt.Sprintf(" slot %d", o.Slot)
			}
		case h.Permits > 0 && o.Kind == kindAcquire && o.Result == resOK:
			s += fmt.Sprintf(" slot %d", o.Slot)
		case o.Kind == kindAcquire && o.Mode == modeShared:
			s += " shared"
		}
		if o.Session != "" {
			s += " session " + short(o.Session, o.Holder)
		}
		s += ": " + o.Result
		if o.Kind == kindRead && o.Result == resOK {
			s += " " + describeHolders(o.Holders)
		}
		if o.Err != "" {
			s += " (" + o.Err + ")"
		}
		lines = append(lines, line{o.Call, s})
	}
	for _, w := range h.Writes {
		if w.At < from || w.At > to {
			continue
		}
		verdict := "accepted"
		if !w.Accepted {
			verdict = "rejected: " + w.Err
		}
		slot := ""
		if w.Semaphore {
			slot = fmt.Sprintf(" slot %d", w.Slot)
		}
		lines = append(lines, line{w.At, fmt.Sprintf("[%s] client %d write %s token %d%s: %s", at(w.At), w.Client, w.Lock, w.Token, slot, verdict)})
	}
	for _, hd := range h.Holds {
		if hd.Client == first.Client && hd.Held <= to && hd.Lost >= from {
			lines = append(lines, line{hd.Held, fmt.Sprintf("[%s, Lost() %s] client %d held %s token %d", at(hd.Held), at(hd.Lost), hd.Client, hd.Lock, hd.Token)})
		}
	}
	for _, f := range h.Faults {
		if f.Start <= to && f.End >= from {
			lines = append(lines, line{f.Start, fmt.Sprintf("[%s, %s] fault %s %s %s", at(f.Start), at(f.End), f.Kind, f.Target, f.Note)})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].t < lines[j].t })
	out := []string{fmt.Sprintf("around the first violation (%s, client %d, at %s):", first.Check, first.Client, at(first.At))}
	for i, l := range lines {
		if i == aroundMax {
			out = append(out, fmt.Sprintf("  ... %d more", len(lines)-aroundMax))
			break
		}
		out = append(out, "  "+l.text)
	}
	return out
}
