package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node/backupfile"
	"github.com/raftlock/raftlock/transport/client"
)

// The operator actions as faults: what the cluster's own operators do to
// it while clients hold locks. Two of them revoke grants without any
// client operation, and the checks must know it (see revoked):
//
//   - restore: a backup taken during the run (GET /v1/snapshot), the
//     workload run on, then the backup restored into the running cluster
//     (POST /v1/snapshot/restore, with a min token above every token seen):
//     every grant made since the backup may be gone, the backup's come
//     back; the lock model makes every lock wild from then on (see
//     lockState.Wild);
//   - delete-token: a holding client's ACL token deleted (which closes its
//     sessions), then a new token made for it, with which it goes on in a
//     new session;
//   - revoke-grant: a holding client's grant revoked by an operator (POST
//     /v1/locks/revoke): its session goes on, the grant ends;
//
// and one must revoke nothing:
//
//   - rotate-members: every member replaced, one by one, by a new node on
//     another address (the new one added, then the old one removed), while
//     the clients know only the addresses they were started with: they
//     must learn the members from the cluster to keep their sessions.
//
// Whatever an operator revokes, the lost-before-regrant check judges it
// as every other grant: the holder's Lost() must close before anyone else
// is granted the lock (docs/DESIGN.md, the checker's operator actions).

// Timing of the operator actions.
const (
	// restoreRunOnMin..restoreRunOnMax: how long the workload runs between
	// the backup and the restore, at least (then it waits, up to
	// holderWait, for a client holding a grant made after the backup).
	restoreRunOnMin, restoreRunOnMax = time.Second, 2 * time.Second
	// revokeExtraMin..revokeExtraMax: a revoked holder is watched for
	// TTL + lock-delay + this (unless both another client was granted its
	// lock and its Lost() closed before), as a cut client is.
	revokeExtraMin, revokeExtraMax = 2 * time.Second, 4 * time.Second
	// quietWait bounds the wait for a quiet moment (no lock held, nobody
	// waiting) to take the restore's backup in.
	quietWait = 5 * time.Second
	// preferFree: how long the restore waits for a holder of a lock the
	// backup holds free before it takes any holder of a grant made since.
	preferFree = 3 * time.Second
	// rotateSettle: after adding a new member, how long the rotation waits
	// before it removes an old one, so that clients can learn it.
	rotateSettle = 2 * time.Second
)

// window is the interval of an operator action's request: from its call
// to its answer (pending: the outcome is unknown).
type window struct{ from, to int64 }

// restoresOf returns the windows of the restores a history records.
func restoresOf(h History) []window {
	var out []window
	for _, f := range h.Faults {
		if f.Kind == faultRestore && f.ActCall != 0 {
			out = append(out, window{f.ActCall, f.ActReturn})
		}
	}
	return out
}

// restoredBetween reports whether a restore's request overlapped
// [from, to].
func restoredBetween(h History, from, to int64) bool {
	for _, w := range restoresOf(h) {
		if w.from <= to && w.to >= from {
			return true
		}
	}
	return false
}

// revoked reports whether an operator action may have taken client's
// sessions or grants away at some moment in [from, to] without any
// operation of the client: a restore (any client), the deletion of
// client's token, or a revocation of its grant (revoke-grant, and the
// late-answer fault's of the grant whose answer it held).
func revoked(h History, client int, from, to int64) bool {
	target := fmt.Sprintf("client%d", client)
	for _, f := range h.Faults {
		end := f.ActReturn
		if f.Kind == faultLateAnswer {
			// The grant it revoked is acknowledged later, when the held
			// answer arrives: the revocation counts until the fault ends.
			end = max(end, f.End)
		}
		if f.ActCall == 0 || f.ActCall > to || end < from {
			continue
		}
		if f.Kind == faultRestore || (f.Kind == faultDeleteToken || f.Kind == faultRevokeGrant || f.Kind == faultLateAnswer) && f.Target == target {
			return true
		}
	}
	return false
}

// clientToken is the ACL token a client process works with.
type clientToken struct {
	id, secret string
	// made is when the checker asked for it (a restore of an older backup
	// loses it).
	made int64
}

// newClientToken makes a token for client c that may write under
// lockPrefix only.
func (c *cluster) newClientToken(ctx context.Context, clientNo int) (clientToken, error) {
	made := monoNow()
	var tok api.TokenSecret
	err := c.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		var err error
		tok, err = cl.CreateToken(ctx, api.TokenRequest{Name: fmt.Sprintf("raftlock-check client%d", clientNo),
			Rules: []string{"write:" + lockPrefix}})
		return err
	})
	if err != nil {
		return clientToken{}, fmt.Errorf("acl: create client%d's token: %w", clientNo, err)
	}
	return clientToken{id: tok.ID, secret: tok.Secret, made: made}, nil
}

// giveToken makes a new token for client c and hands it over (msgToken):
// the client's requests carry it from then on.
// It runs even when the run's context has ended: a client must not be
// left without a valid token.
func (in *injector) giveToken(c int) error {
	tctx, cancel := waitCtx(30 * time.Second)
	defer cancel()
	tok, err := in.cl.newClientToken(tctx, c)
	if err != nil {
		return err
	}
	in.tokens[c] = tok
	in.cs.procs[c].send(message{T: msgToken, Secret: tok.secret})
	return nil
}

// pinHolder finds a running client that holds a lock (awaitHolder, with
// accept deciding which holds qualify, and for the first preferFor also
// prefer) and pins it (msgPin), so that it keeps the grant until its
// Lost() closes. ok is false if none could be pinned; unpin must be
// called when ok.
func (in *injector) pinHolder(ctx context.Context, accept, prefer func(message) bool, preferFor time.Duration) (c int, hold message, ok bool) {
	actx, cancel := context.WithTimeout(ctx, holderWait)
	defer cancel()
	preferUntil := time.Now().Add(preferFor)
	for {
		picky := prefer != nil && time.Now().Before(preferUntil)
		c, hold, ok = in.track.pickHolder(in.rng, func(i int, h message) bool {
			return !in.cs.procs[i].isPaused() && (accept == nil || accept(h)) && (!picky || prefer(h))
		})
		if ok {
			break
		}
		if !sleep(actx, 100*time.Millisecond) {
			return 0, message{}, false
		}
	}
	pctx, cancel2 := context.WithTimeout(ctx, pinTimeout)
	r, err := in.cs.procs[c].request(pctx, message{T: msgPin, Lock: hold.Lock, Token: hold.Token})
	cancel2()
	if err != nil || !r.OK {
		in.cs.procs[c].send(message{T: msgUnpin})
		return 0, message{}, false
	}
	return c, hold, true
}

// watchRevoked waits until another client was granted hold's lock and
// client c reported hold's Lost() closed, or TTL + lock-delay +
// revokeExtraMin..revokeExtraMax passed (or ctx ended), and says which
// happened when, counted from since, for the fault's note.
func (in *injector) watchRevoked(ctx context.Context, c int, hold message, newer, lostCh <-chan struct{}, since int64) string {
	t := time.NewTimer(in.cfg.TTL + in.cfg.LockDelay + in.between(revokeExtraMin, revokeExtraMax))
	defer t.Stop()
	regranted, lostAt := int64(0), int64(0)
wait:
	for regranted == 0 || lostAt == 0 {
		select {
		case <-newer:
			regranted, newer = monoNow(), nil
		case <-lostCh:
			lostAt, lostCh = monoNow(), nil
		case <-t.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	after := func(at int64) string { return time.Duration(at - since).Round(100 * time.Millisecond).String() }
	note := fmt.Sprintf("client%d holding %s token %d", c, hold.Lock, hold.Token)
	if regranted != 0 {
		note += ", re-granted after " + after(regranted)
	} else {
		note += ", not re-granted"
	}
	if lostAt != 0 {
		note += ", Lost() after " + after(lostAt)
	} else {
		note += ", Lost() still open"
	}
	return note
}

// actOutcome turns the error of an operator action's request into the
// window's end: its answer (now), pending if the outcome is unknown, or
// an error if it surely changed nothing.
func actOutcome(err error) (int64, error) {
	switch {
	case err == nil:
		return monoNow(), nil
	case errors.Is(err, api.ErrUnknownOutcome) || errors.Is(err, context.DeadlineExceeded):
		return pending, nil
	}
	return 0, err
}

// restore takes a backup, preferably at a quiet moment (no lock held,
// nobody waiting, for up to quietWait), lets the workload run on until a
// client holds a grant made after it (pinned, preferably one others wait
// for, and for up to preferFree of a lock the backup holds free), and
// restores the backup into the running cluster with a min token above
// every token seen. The restored state lacks that grant: the holder must
// learn that it lost it before anyone else is granted the lock. (A backup
// taken while locks are held brings their grants and queues back, though
// their clients may have let go of them since: they must come free, by
// the same rule.) Then clients whose token the restore lost get new ones.
func (in *injector) restore(ctx context.Context) (FaultRec, error) {
	var buf bytes.Buffer
	qctx, cancel := context.WithTimeout(ctx, quietWait)
	for !in.track.quiet() && sleep(qctx, 10*time.Millisecond) {
	}
	cancel()
	start := monoNow()
	var info api.SnapshotInfo
	if err := in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		var err error
		info, err = cl.Snapshot(ctx, &buf)
		return err
	}); err != nil {
		return FaultRec{}, fmt.Errorf("%w: backup: %v", errSkipped, err)
	}
	backedUp := monoNow()
	// A lock held, waited for or in a lock-delay in the backup comes back
	// so: its grant after the backup may not go to anyone else at once.
	busy, err := busyLocks(buf.Bytes())
	if err != nil {
		return FaultRec{}, fmt.Errorf("%w: backup: %v", errSkipped, err)
	}
	rec := FaultRec{Kind: faultRestore, Target: "cluster", Start: start}
	sleep(ctx, in.between(restoreRunOnMin, restoreRunOnMax))
	c, hold, pinned := in.pinHolder(ctx, func(m message) bool { return m.At > backedUp },
		func(m message) bool { return !busy[m.Lock] }, preferFree)
	var newer, lostCh <-chan struct{}
	if pinned {
		defer in.cs.procs[c].send(message{T: msgUnpin})
		rec.Lock, rec.Token = hold.Lock, hold.Token
		newer = in.track.grantAbove(hold.Lock, hold.Slot, hold.Token)
		lostCh = in.track.lostOf(c, hold.Lock, hold.Token)
	}
	if ctx.Err() != nil {
		return FaultRec{}, fmt.Errorf("%w: the run ended before the restore", errSkipped)
	}
	minToken := in.track.maxToken() + 1
	rec.ActCall, rec.ActReturn = monoNow(), pending
	// Recorded at once: a check run meanwhile (--stop-on-violation) must
	// know that grants may be revoked from here on.
	in.hist.beginFault(rec)
	var ri api.RestoreInfo
	err = in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		var err error
		ri, err = cl.Restore(ctx, buf.Bytes(), minToken)
		return err
	})
	ret, aerr := actOutcome(err)
	if aerr != nil {
		return FaultRec{}, fmt.Errorf("%w: restore: %v", errSkipped, aerr)
	}
	rec.ActReturn = ret
	in.hist.beginFault(rec)
	rec.Note = fmt.Sprintf("(backup of index %d, %d bytes, restored after %v, floor %d",
		info.Index, buf.Len(), time.Duration(rec.ActCall-backedUp).Round(100*time.Millisecond), ri.Floor)
	if rec.ActReturn == pending {
		rec.Note = fmt.Sprintf("(backup of index %d, restore of unknown outcome: %v", info.Index, err)
	}
	if pinned {
		inBackup := "free"
		if busy[hold.Lock] {
			inBackup = "busy"
		}
		rec.Note += fmt.Sprintf("; %s, its lock %s in the backup", in.watchRevoked(ctx, c, hold, newer, lostCh, rec.ActCall), inBackup)
	} else {
		rec.Note += "; no client held a grant made after the backup"
	}
	// The restore brought back the backup's tokens: a client whose token
	// was made after the backup needs a new one.
	if in.cfg.ACL {
		for i, tok := range in.tokens {
			if tok.made >= start {
				if err := in.giveToken(i); err != nil {
					in.logf("after restore: %v", err)
				}
			}
		}
	}
	rec.Note += ")"
	rec.End = monoNow()
	return rec, nil
}

// busyLocks returns the locks of the run that a backup file holds held,
// waited for or in a lock-delay, read as a restore reads it.
func busyLocks(file []byte) (map[string]bool, error) {
	b, err := backupfile.Parse(file)
	if err != nil {
		return nil, err
	}
	f := fsm.New(nil)
	if err := f.Load(b.State); err != nil {
		return nil, fmt.Errorf("backup state: %w", err)
	}
	busy := map[string]bool{}
	for _, l := range f.Locks(lockPrefix) {
		if len(l.Holders) > 0 || len(l.Waiters) > 0 || l.Delayed {
			busy[l.Name] = true
		}
	}
	return busy, nil
}

// deleteToken deletes the ACL token of a client that holds a lock
// (pinned, preferably one others wait for): that closes its sessions.
// The holder must learn that it lost the lock before anyone else is
// granted it. Then the client gets a new token and goes on with a new
// session.
func (in *injector) deleteToken(ctx context.Context) (FaultRec, error) {
	if !in.cfg.ACL {
		return FaultRec{}, fmt.Errorf("%w: ACLs are off", errSkipped)
	}
	c, hold, ok := in.pinHolder(ctx, nil, nil, 0)
	if !ok {
		return FaultRec{}, fmt.Errorf("%w: no client held a lock within %s", errSkipped, holderWait)
	}
	defer in.cs.procs[c].send(message{T: msgUnpin})
	newer := in.track.grantAbove(hold.Lock, hold.Slot, hold.Token)
	lostCh := in.track.lostOf(c, hold.Lock, hold.Token)
	rec := FaultRec{Kind: faultDeleteToken, Target: fmt.Sprintf("client%d", c), Start: monoNow(),
		Lock: hold.Lock, Token: hold.Token}
	rec.ActCall, rec.ActReturn = monoNow(), pending
	in.hist.beginFault(rec)
	err := in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		return cl.DeleteToken(ctx, in.tokens[c].id)
	})
	ret, aerr := actOutcome(err)
	if aerr != nil {
		return FaultRec{}, fmt.Errorf("%w: delete client%d's token: %v", errSkipped, c, aerr)
	}
	rec.ActReturn = ret
	in.hist.beginFault(rec)
	rec.Note = "(" + in.watchRevoked(ctx, c, hold, newer, lostCh, rec.ActCall)
	if err := in.giveToken(c); err != nil {
		rec.Note += fmt.Sprintf("; no new token: %v", err)
	}
	rec.Note += ")"
	rec.End = monoNow()
	return rec, nil
}

// revokeGrant revokes the grant of a client that holds a lock (pinned,
// so that it keeps the grant until its Lost() closes), of whatever kind
// it is (exclusive, shared, a semaphore's slot): the holder must
// learn at its keepalive that it lost the lock before anyone else is
// granted it. Its session goes on.
func (in *injector) revokeGrant(ctx context.Context) (FaultRec, error) {
	c, hold, ok := in.pinHolder(ctx, nil, nil, 0)
	if !ok {
		return FaultRec{}, fmt.Errorf("%w: no client held a lock within %s", errSkipped, holderWait)
	}
	defer in.cs.procs[c].send(message{T: msgUnpin})
	var req api.RevokeRequest
	err := in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		st, err := cl.LockState(ctx, hold.Lock)
		if err != nil {
			return err
		}
		// One entry may grant several holders one token (shared
		// waiters, slots): the holder id names the grant.
		for _, h := range st.Holders {
			if uint64(h.Token) == hold.Token && h.Holder == hold.Holder {
				req = api.RevokeRequest{Name: hold.Lock, Holder: h.Holder, SessionHandle: h.SessionHandle,
					Reason: fmt.Sprintf("raftlock-check: client%d", c)}
				return nil
			}
		}
		return fmt.Errorf("token %d no longer holds %s", hold.Token, hold.Lock)
	})
	if err != nil {
		return FaultRec{}, fmt.Errorf("%w: find client%d's grant: %v", errSkipped, c, err)
	}
	newer := in.track.grantAbove(hold.Lock, hold.Slot, hold.Token)
	lostCh := in.track.lostOf(c, hold.Lock, hold.Token)
	rec := FaultRec{Kind: faultRevokeGrant, Target: fmt.Sprintf("client%d", c), Start: monoNow(),
		Lock: hold.Lock, Token: hold.Token}
	rec.ActCall, rec.ActReturn = monoNow(), pending
	in.hist.beginFault(rec)
	err = in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.RevokeGrant(ctx, req)
		return err
	})
	ret, aerr := actOutcome(err)
	if aerr != nil {
		return FaultRec{}, fmt.Errorf("%w: revoke client%d's grant: %v", errSkipped, c, aerr)
	}
	rec.ActReturn = ret
	in.hist.beginFault(rec)
	rec.Note = "(" + in.watchRevoked(ctx, c, hold, newer, lostCh, rec.ActCall) + ")"
	rec.End = monoNow()
	return rec, nil
}

// rotateMembers replaces every member, one by one, by a spare on another
// address: the spare joins (--join) and becomes a voter, the rotation
// waits rotateSettle, then an old member is removed, stopped and wiped
// (it becomes a spare). The clients were given the members' addresses at
// their start only: after the first rotation none of them is a member
// (the next one brings those addresses back, as new members). The fault
// then lasts the clients' TTL + grace + freezeExtraMin..freezeExtraMax
// more, with no other fault: longer than a client that cannot reach a
// member keeps its session, which check 4 judges.
func (in *injector) rotateMembers(ctx context.Context) (FaultRec, error) {
	if len(in.cl.spares) < len(in.cl.nodes) {
		return FaultRec{}, fmt.Errorf("%w: %d spares for %d members", errSkipped, len(in.cl.spares), len(in.cl.nodes))
	}
	if _, err := in.findLeader(ctx); err != nil {
		return FaultRec{}, err
	}
	olds := slices.Clone(in.cl.nodes)
	in.rng.Shuffle(len(olds), func(i, j int) { olds[i], olds[j] = olds[j], olds[i] })
	news := slices.Clone(in.cl.spares[:len(olds)])
	rec := FaultRec{Kind: faultRotateMembers, Target: ids(olds) + " -> " + ids(news), Start: monoNow(), LeaderLoss: true}
	done, changed := 0, false
	for i, old := range olds {
		nw := news[i]
		if err := in.cl.bringIn(ctx, nw); err != nil {
			rec.Note = fmt.Sprintf("(%s not in: %v)", nw.id, err)
			break
		}
		in.cl.promote(nw)
		changed = true
		if !sleep(ctx, rotateSettle) {
			rec.Note = "(run ended mid-rotation)"
			break
		}
		if err := in.removeAndWipe(ctx, old); err != nil {
			rec.Note = fmt.Sprintf("(%v)", err)
			break
		}
		in.cl.demote(old)
		done++
	}
	if !changed {
		return FaultRec{}, fmt.Errorf("%w: rotation did not start %s", errSkipped, rec.Note)
	}
	rec.Note = fmt.Sprintf("(%d of %d replaced in %v) %s", done, len(olds),
		time.Duration(monoNow()-rec.Start).Round(100*time.Millisecond), rec.Note)
	if done == len(olds) {
		sleep(ctx, in.cfg.TTL+in.cfg.Grace+in.between(freezeExtraMin, freezeExtraMax))
	}
	rec.End = monoNow()
	return rec, nil
}

// promote makes spare n a member.
func (c *cluster) promote(n *nodeProc) {
	c.spares = slices.DeleteFunc(c.spares, func(s *nodeProc) bool { return s == n })
	c.nodes = append(c.nodes, n)
}

// demote makes member n (removed) a spare.
func (c *cluster) demote(n *nodeProc) {
	c.nodes = slices.DeleteFunc(c.nodes, func(m *nodeProc) bool { return m == n })
	c.spares = append(c.spares, n)
}
