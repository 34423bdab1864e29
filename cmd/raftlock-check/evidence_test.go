package main

import (
	"strings"
	"testing"
	"time"
)

// TestReportListsTheHistoryAroundTheFirstViolation pins what a failed
// run's report shows beyond the violations: the operations, writes and
// faults around the first violation of a check other than
// linearizability (which porcupine's explanation covers), and nothing
// for a run whose only violation is linearizability's.
func TestReportListsTheHistoryAroundTheFirstViolation(t *testing.T) {
	s := int64(time.Second)
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10*s, 10*s+5, resOK, 5),
		opAcq(1, sB, hB, lk, 11*s, 12*s, resOK, 9),
		opRead(1, lk, 40*s, 40*s+1, hold(sB, hB, 9)), // far after: left out
	)
	h.Writes = []WriteRec{write(0, sA, hA, lk, 5, 12*s+500, true)}
	h.Faults = []FaultRec{{Kind: faultPauseClient, Target: "client0", Start: 10 * s, End: 12 * s}}
	vs := []Violation{
		{Check: checkLinearizable, Client: -1, What: "not linearizable"},
		{Check: checkFencing, At: 12*s + 500, Client: 0, What: "stale write"},
	}
	lines := aroundFirst(h, vs)
	got := strings.Join(lines, "\n")
	for _, want := range []string{"around the first violation (fencing, client 0", "client 0 acquire " + lk + " token 5",
		"client 1 acquire " + lk + " token 9", "client 0 write " + lk + " token 5: accepted", "fault pause-client client0"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "read") {
		t.Errorf("a read 28 s after the violation is listed:\n%s", got)
	}
	if l := aroundFirst(h, vs[:1]); l != nil {
		t.Errorf("a linearizability violation alone: %q, want nothing (porcupine's explanation covers it)", l)
	}
	rep := &Report{Violations: vs, Around: lines, Seed: 42}
	var sb strings.Builder
	rep.print(&sb)
	if !strings.Contains(sb.String(), "--seed 42") || !strings.Contains(sb.String(), "around the first violation") {
		t.Errorf("the report names neither the seed nor the history around the violation:\n%s", sb.String())
	}
}
