package main

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckFence(t *testing.T) {
	// A holds token 5 from 20 until it releases at 400; its session lives
	// to the end. B is granted token 9 at 500 (acknowledged at 510).
	ops := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opRel(0, sA, hA, lk, 400, 410, resOK),
		opAcq(1, sB, hB, lk, 490, 510, resOK, 9),
		opKA(0, sA, 900, 901, resOK), opKA(1, sB, 900, 901, resOK),
	}
	for _, tc := range []struct {
		name   string
		writes []WriteRec
		want   int
	}{
		{"writes in token order", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 200, true),
			write(1, sB, hB, lk, 9, 600, true), write(0, sA, hA, lk, 5, 700, false)}, 0},
		{"stale write accepted before the next grant was acknowledged", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 505, true),
			write(1, sB, hB, lk, 9, 600, true)}, 0},
		{"stale write accepted inside the next holder's tenure", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 550, true),
			write(1, sB, hB, lk, 9, 600, true)}, 1},
		{"two writers with one token", []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(1, sB, hB, lk, 5, 150, true)}, 1},
		{"a current holder's write rejected", []WriteRec{
			write(1, sB, hB, lk, 9, 100, true), write(0, sA, hA, lk, 5, 150, false)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(ops...)
			h.Writes = tc.writes
			wantViolations(t, tc.name, checkFence(h), tc.want)
		})
	}
}

// TestCheckFenceLateWriteMayLandBeforeTheNewerHoldersFirst pins what
// fencing promises a write held on the wire past the lock-delay (a
// late-write fault): it may land in the next tenure while the resource
// has not seen the newer token, and the fence admits it; once the
// resource admitted the newer token, it must refuse it. A write of a
// stale holder that was not held in transit stays judged by the
// lock-delay rule (TestCheckFence).
func TestCheckFenceLateWriteMayLandBeforeTheNewerHoldersFirst(t *testing.T) {
	// A holds token 5 and releases at 400; B is granted token 9 at 500
	// (acknowledged at 510). The late-write fault held A's write from 300
	// to 700.
	ops := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opRel(0, sA, hA, lk, 400, 410, resOK),
		opAcq(1, sB, hB, lk, 490, 510, resOK, 9),
		opKA(0, sA, 900, 901, resOK), opKA(1, sB, 900, 901, resOK),
	}
	late := FaultRec{Kind: faultLateWrite, Target: "client0", Start: 300, End: 700, Lock: lk, Token: 5}
	for _, tc := range []struct {
		name   string
		faults []FaultRec
		writes []WriteRec
		want   int
	}{
		{"held write admitted in the next tenure before the newer holder's first write", []FaultRec{late}, []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 550, true),
			write(1, sB, hB, lk, 9, 600, true)}, 0},
		{"held write admitted after the newer holder's write", []FaultRec{late}, []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(1, sB, hB, lk, 9, 600, true),
			write(0, sA, hA, lk, 5, 650, true)}, 1},
		{"held write refused after the newer holder's write", []FaultRec{late}, []WriteRec{
			write(0, sA, hA, lk, 5, 100, true), write(1, sB, hB, lk, 9, 600, true),
			write(0, sA, hA, lk, 5, 650, false)}, 0},
		{"a write of the same grant not held in transit", []FaultRec{{Kind: faultLateWrite, Target: "client0", Start: 300, End: 540, Lock: lk, Token: 5}},
			[]WriteRec{write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 550, true),
				write(1, sB, hB, lk, 9, 600, true)}, 1},
		{"another client's late write", []FaultRec{{Kind: faultLateWrite, Target: "client2", Start: 300, End: 700, Lock: lk, Token: 5}},
			[]WriteRec{write(0, sA, hA, lk, 5, 100, true), write(0, sA, hA, lk, 5, 550, true),
				write(1, sB, hB, lk, 9, 600, true)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(ops...)
			h.Writes, h.Faults = tc.writes, tc.faults
			wantViolations(t, tc.name, checkFence(h), tc.want)
		})
	}
}

func TestCheckFenceExpiredHolder(t *testing.T) {
	// A's session is last kept alive at 100 and reported gone at 1500; a
	// rejected write of A after its lease (1100) is just a stale holder.
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opKA(0, sA, 100, 110, resOK),
		opKA(0, sA, 1500, 1510, resNotFound),
		opAcq(1, sB, hB, lk, 1000, 1200, resOK, 9),
	)
	h.Writes = []WriteRec{write(1, sB, hB, lk, 9, 1300, true), write(0, sA, hA, lk, 5, 1400, false)}
	wantViolations(t, "rejected after the lease", checkFence(h), 0)
}

func TestCheckGrantsKept(t *testing.T) {
	base := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opKA(0, sA, 3000, 3001, resOK),
	}
	for _, tc := range []struct {
		name         string
		read         Op
		want, judged int
	}{
		{"holder seen", opRead(1, lk, 100, 110, hold(sA, hA, 5)), 0, 1},
		{"holder lost", opRead(1, lk, 100, 110), 1, 1},
		{"someone else holds", opRead(1, lk, 100, 110, hold(sB, hB, 9)), 1, 1},
		{"read concurrent with the grant", opRead(1, lk, 15, 25), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, judged := checkGrantsKept(hist(append(append([]Op(nil), base...), tc.read)...))
			wantViolations(t, tc.name, vs, tc.want)
			if judged != tc.judged {
				t.Errorf("judged %d reads, want %d", judged, tc.judged)
			}
		})
	}
	// Once the session may have expired, a read proves nothing.
	h := hist(opOpen(0, sA, 1, 2), opAcq(0, sA, hA, lk, 10, 20, resOK, 5), opRead(1, lk, 2000, 2010))
	if vs, judged := checkGrantsKept(h); len(vs) != 0 || judged != 0 {
		t.Errorf("read after the lease: %v, %d judged; want none", vs, judged)
	}
}

func TestCheckSessionsKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want int
	}{
		{"gone after the lease", []Op{opKA(0, sA, 100, 110, resOK), opKA(0, sA, 1200, 1210, resNotFound)}, 0},
		{"gone before the lease ended", []Op{opKA(0, sA, 100, 110, resOK), opKA(0, sA, 600, 610, resNotFound)}, 1},
		{"acquire answered not_found within the lease", []Op{opKA(0, sA, 100, 110, resOK),
			opAcq(0, sA, hA, lk, 500, 510, resNotFound, 0)}, 1},
		{"kept alive after it was gone", []Op{opKA(0, sA, 1200, 1210, resNotFound), opKA(0, sA, 1300, 1310, resOK)}, 1},
		{"not_found after a close", []Op{opClose(0, sA, 100, 110, resOK), opKA(0, sA, 120, 130, resNotFound)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append([]Op{opOpen(0, sA, 1, 2)}, tc.ops...)...)
			// The client was paused: only the lease rule judges.
			h.Faults = []FaultRec{{Kind: faultPauseClient, Target: "client0", Start: 150, End: 1150}}
			wantViolations(t, tc.name, checkSessionsKept(h), tc.want)
		})
	}
}

// A session whose client kept it alive — never paused nor cut off, not
// closed, its process running — is never lost, neither reported gone by
// the cluster after its lease nor declared expired by its client: a frozen
// node costs a client a bounded delay, never its session.
func TestCheckSessionsKeptByTheirClientAreNeverLost(t *testing.T) {
	gone := []Op{opKA(0, sA, 100, 110, resOK), opKA(0, sA, 1200, 1210, resNotFound)}
	expired := []ExpiryRec{{Client: 0, Session: sA, At: 2500, Err: "jeopardy outlasted the grace period"}}
	freeze := FaultRec{Kind: faultFreezeNode, Target: "n1", Start: 150, End: 3000}
	for _, tc := range []struct {
		name     string
		ops      []Op
		expiries []ExpiryRec
		faults   []FaultRec
		exited   []int64
		want     int
	}{
		{"reported gone after the lease, client kept it", gone, nil, []FaultRec{freeze}, nil, 1},
		{"declared expired by its client, client kept it", []Op{opKA(0, sA, 100, 110, resOK)}, expired, []FaultRec{freeze}, nil, 1},
		{"gone and declared expired: one violation", gone, expired, nil, nil, 1},
		{"client paused", gone, nil, []FaultRec{{Kind: faultPauseClient, Target: "client0", Start: 150, End: 1150}}, nil, 0},
		{"client cut off, the cut still on", gone, expired, []FaultRec{{Kind: faultPartitionClient, Target: "client0", Start: 900, End: pending}}, nil, 0},
		{"another client paused", gone, nil, []FaultRec{{Kind: faultPauseClient, Target: "client1", Start: 150, End: 1150}}, nil, 1},
		{"closed first", append(append([]Op(nil), gone...), opClose(0, sA, 1100, 1300, resOK)), nil, nil, nil, 0},
		{"its process exited", []Op{opKA(0, sA, 100, 110, resOK)}, expired, nil, []int64{2000, pending, pending}, 0},
		{"never lost", []Op{opKA(0, sA, 100, 110, resOK)}, nil, []FaultRec{freeze}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append([]Op{opOpen(0, sA, 1, 2)}, tc.ops...)...)
			h.Expiries, h.Faults, h.Exited = tc.expiries, tc.faults, tc.exited
			vs := checkSessionsKept(h)
			wantViolations(t, tc.name, vs, tc.want)
			if rep := analyze(h, time.Second); rep.ExpiredUnpaused != tc.want {
				t.Errorf("report: %d sessions kept alive by their client expired, want %d", rep.ExpiredUnpaused, tc.want)
			}
			if len(vs) == 1 && len(tc.faults) == 1 && !strings.Contains(vs[0].What, "during "+tc.faults[0].Kind) {
				t.Errorf("violation %q does not name the fault it happened in", vs[0].What)
			}
		})
	}
}

func TestUnavailability(t *testing.T) {
	h := hist(
		opKA(0, sA, 100, 110, resOK),
		opKA(0, sA, 1000, 1800, resFailed),
		opKA(0, sA, 1100, 1900, resOK),
		opRead(1, lk, 1200, 1700),
	)
	h.Faults = []FaultRec{{Kind: faultKillLeader, Start: 1000, End: 1500, LeaderLoss: true},
		{Kind: faultKillFollower, Start: 3000, End: 3500}}
	us := unavailabilities(h)
	if len(us) != 1 || us[0].D != 700 {
		t.Fatalf("unavailabilities %v, want one of 700ns", us)
	}
	if p50, max := percentiles([]time.Duration{3, 1, 2}); p50 != 2 || max != 3 {
		t.Errorf("percentiles: %v %v", p50, max)
	}
}

func TestParseFlags(t *testing.T) {
	var sb strings.Builder
	cfg, err := parseFlags([]string{"--nodes", "5", "--faults", "kill-leader, pause-client", "--seed", "7"}, &sb)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Nodes != 5 || cfg.Seed != 7 || strings.Join(cfg.Faults, ",") != "kill-leader,pause-client" {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--nodes", "4"},
		{"--faults", "kill-everything"},
		{"--ttl", "2s", "--lock-delay", "3s"},
		{"--clients", "0"},
		{"--naive-share", "1.5"},
		{"extra"},
	} {
		if _, err := parseFlags(bad, &sb); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
	if cfg, err := parseFlags([]string{"--faults", "none"}, &sb); err != nil || len(cfg.Faults) != 0 {
		t.Errorf("--faults none: %v %v", cfg.Faults, err)
	}
	if cfg, err := parseFlags([]string{"--faults", faultPartitionClient}, &sb); err != nil || len(cfg.Faults) != 1 || !isPartition(cfg.Faults[0]) {
		t.Errorf("--faults %s: %v %v; it must parse, and need iptables", faultPartitionClient, cfg.Faults, err)
	}
	if !slices.Contains(defaultConfig().Faults, faultPartitionClient) {
		t.Errorf("the default faults %v leave out %s", defaultConfig().Faults, faultPartitionClient)
	}
}

func TestLostMustCloseBeforeRegrant(t *testing.T) {
	// A (client 0) holds token 5 from 21; its session is last kept alive
	// at 100, so the cluster may expire it at 1100 and, after the
	// lock-delay, grant the lock to B (client 1), who waits for it and is
	// granted token 9 at 1500.
	base := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opKA(0, sA, 100, 110, resOK),
		opWaitAcq(1, sB, hB, lk, 200, 1500, resOK, 9),
		opKA(1, sB, 1400, 1410, resOK),
	}
	pause := FaultRec{Kind: faultPauseClient, Target: "client0", Start: 500, End: 1600}
	for _, tc := range []struct {
		name         string
		ops          []Op
		holds        []HoldRec
		exited       []int64
		faults       []FaultRec
		want, judged int
	}{
		{"Lost() closed before the re-grant", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1400), holdRec(1, sB, hB, lk, 9, 1501, pending)}, nil, nil, 0, 1},
		{"Lost() still open at the re-grant", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1600)}, nil, nil, 1, 1},
		{"Lost() never closed while the client ran", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, pending)}, nil, nil, 1, 1},
		{"Lost() never closed, client running at the end of the history", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, pending)}, []int64{pending, pending}, nil, 1, 1},
		{"client exited before the re-grant", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, pending)}, []int64{1000, pending}, nil, 0, 0},
		{"released by its client before the re-grant", []Op{opRel(0, sA, hA, lk, 1200, pending, resUnknown)},
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1600)}, nil, nil, 0, 0},
		{"released by its client, Lost() reported before the re-grant", []Op{opRel(0, sA, hA, lk, 1200, 1210, resOK)},
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1199)}, nil, nil, 0, 1},
		{"released by its client after the re-grant", []Op{opRel(0, sA, hA, lk, 1550, 1560, resNotHolder)},
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1540)}, nil, nil, 1, 1},
		{"session closed by its client before the re-grant", []Op{opClose(0, sA, 1200, pending, resUnknown)},
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1600)}, nil, nil, 0, 0},
		{"client paused before the re-grant", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1700)}, nil, []FaultRec{pause}, 0, 0},
		{"client paused, pause still going on", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, pending)}, nil,
			[]FaultRec{{Kind: faultPauseClient, Target: "client0", Start: 500, End: pending}}, 0, 0},
		{"another client paused", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1700)}, nil,
			[]FaultRec{{Kind: faultPauseClient, Target: "client1", Start: 500, End: 1600}}, 1, 1},
		{"client cut off from the cluster (not paused)", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1700)}, nil,
			[]FaultRec{{Kind: faultPartitionClient, Target: "client0", Start: 110, End: 1700, Lock: lk, Token: 5}}, 1, 1},
		{"handle reached the client after the re-grant, Lost() closed at once", nil,
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 1550, 1550)}, nil, nil, 0, 1},
		{"client never had a handle (no hold)", nil, nil, nil, nil, 0, 0},
		{"the earliest acknowledged later grant counts", []Op{
			opOpen(2, sC, 1, 2), opKA(2, sC, 1400, 1410, resOK),
			opAcq(2, sC, hC, lk, 1300, 1450, resOK, 12)},
			[]HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1480)}, nil, nil, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append([]Op(nil), base...), tc.ops...)...)
			h.Holds, h.Exited, h.Faults = tc.holds, tc.exited, tc.faults
			vs, judged := checkLostBeforeRegrant(h)
			wantViolations(t, tc.name, vs, tc.want)
			if judged != tc.judged {
				t.Errorf("judged %d grants, want %d", judged, tc.judged)
			}
			for _, v := range vs {
				if v.Check != checkLostRegrant || v.Client != 0 {
					t.Errorf("violation %+v: want check %s about client 0", v, checkLostRegrant)
				}
			}
		})
	}
}

// TestLateGrantMustNotBeTrusted pins the late-grant rule of check 5: a
// client that learns of its grant only after the cluster granted the
// lock to another (the late-answer fault held the answer; the grant was
// revoked meanwhile) must not report it held with Lost() open.
func TestLateGrantMustNotBeTrusted(t *testing.T) {
	s := int64(time.Second)
	// A's waiting acquire was granted token 5 at about 1 s, its answer
	// held until 20 s; the grant was revoked at 2 s and granted to B
	// (token 9, acknowledged at 15 s). A's session was kept alive all
	// along.
	base := []Op{
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opWaitAcq(0, sA, hA, lk, s, 20*s, resOK, 5),
		opWaitAcq(1, sB, hB, lk, 3*s, 15*s, resOK, 9),
		opKA(0, sA, 21*s, 21*s+1, resOK), opKA(1, sB, 21*s, 21*s+1, resOK),
	}
	late := FaultRec{Kind: faultLateAnswer, Target: "client0", Start: s, End: 20 * s, Lock: lk, Token: 5, ActCall: 2 * s, ActReturn: 2*s + 1}
	for _, tc := range []struct {
		name         string
		ops          []Op
		hold         HoldRec
		faults       []FaultRec
		want, judged int
	}{
		{"late grant trusted: Lost() open", nil, holdRec(0, sA, hA, lk, 5, 20*s+1, 25*s), []FaultRec{late}, 1, 1},
		{"late grant trusted: Lost() never closed", nil, holdRec(0, sA, hA, lk, 5, 20*s+1, pending), []FaultRec{late}, 1, 1},
		{"late grant handed out with Lost() closed", nil, holdRec(0, sA, hA, lk, 5, 20*s+1, 20*s+2), []FaultRec{late}, 0, 1},
		{"client paused before it reported the hold", nil, holdRec(0, sA, hA, lk, 5, 20*s+1, 25*s),
			[]FaultRec{late, {Kind: faultPauseClient, Target: "client0", Start: 16 * s, End: 19 * s}}, 0, 0},
		{"released by its client before the hold", []Op{opRel(0, sA, hA, lk, 19*s, 19*s+1, resOK)},
			holdRec(0, sA, hA, lk, 5, 20*s+1, 25*s), []FaultRec{late}, 0, 0},
		{"hold before the re-grant: the usual rule", nil, holdRec(0, sA, hA, lk, 5, 14*s, 14*s+1), []FaultRec{late}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hist(append(append([]Op(nil), base...), tc.ops...)...)
			h.Holds, h.Faults = []HoldRec{tc.hold}, tc.faults
			vs, judged := checkLostBeforeRegrant(h)
			wantViolations(t, tc.name, vs, tc.want)
			if judged != tc.judged {
				t.Errorf("judged %d grants, want %d", judged, tc.judged)
			}
			for _, v := range vs {
				if v.Check != checkLostRegrant || v.Client != 0 || !strings.Contains(v.What, "ended before its client knew of it") {
					t.Errorf("violation %+v: want check %s about client 0's late grant", v, checkLostRegrant)
				}
			}
		})
	}
}

func TestLostBeforeRegrantNamesTheEarliestLaterGrant(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2), opOpen(2, sC, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opWaitAcq(1, sB, hB, lk, 200, 1500, resOK, 9),
		opAcq(2, sC, hC, lk, 1300, 1450, resOK, 12),
	)
	h.Holds = []HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1480)}
	vs, _ := checkLostBeforeRegrant(h)
	if len(vs) != 1 || vs[0].At != 1450 || !strings.Contains(vs[0].What, "client 2 was granted it (token 12)") {
		t.Errorf("violations %+v: want one at 1450 naming client 2's token 12", vs)
	}
}

func TestQuickChecksIncludeLostBeforeRegrant(t *testing.T) {
	h := hist(
		opOpen(0, sA, 1, 2), opOpen(1, sB, 1, 2),
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opKA(0, sA, 100, 110, resOK),
		opWaitAcq(1, sB, hB, lk, 200, 1500, resOK, 9),
		opKA(1, sB, 1400, 1410, resOK),
	)
	h.Holds = []HoldRec{holdRec(0, sA, hA, lk, 5, 21, 1600)}
	vs := quickChecks(h)
	if len(vs) != 1 || vs[0].Check != checkLostRegrant {
		t.Errorf("quick checks found %+v, want one %s violation", vs, checkLostRegrant)
	}
}

func TestCutRegrantsCountsGrantsDuringTheCut(t *testing.T) {
	h := hist(
		opAcq(0, sA, hA, lk, 10, 20, resOK, 5),
		opWaitAcq(1, sB, hB, lk, 200, 1500, resOK, 9),
	)
	h.Faults = []FaultRec{
		{Kind: faultPartitionClient, Target: "client0", Start: 100, End: 1600, Lock: lk, Token: 5},
		{Kind: faultPartitionClient, Target: "client1", Start: 2000, End: 3000, Lock: lk, Token: 9},
		{Kind: faultPauseClient, Target: "client0", Start: 100, End: 1600, Lock: lk, Token: 5},
	}
	if cuts, regrants := cutRegrants(h); cuts != 2 || regrants != 1 {
		t.Errorf("cutRegrants: %d cuts, %d re-granted; want 2, 1", cuts, regrants)
	}
}

func TestClientAddressesAreNotNodeAddresses(t *testing.T) {
	nodes := map[string]bool{}
	for i := 0; i < 5; i++ {
		nodes[nodeIP(i)] = true
	}
	seen := map[string]bool{}
	for i := 0; i < 64; i++ {
		ip := clientIP(i)
		if nodes[ip] || seen[ip] || net.ParseIP(ip) == nil || !net.ParseIP(ip).IsLoopback() {
			t.Errorf("client %d's address %s: want a loopback address of its own", i, ip)
		}
		seen[ip] = true
	}
}
