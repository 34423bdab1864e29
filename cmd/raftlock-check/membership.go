package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// joinTimeout bounds how long a node brought in with --join may take to
// become a voter.
const joinTimeout = time.Minute

// joinAddrs is the --join list of node n: every other member's HTTP
// address (raftlockd takes them as https:// when it has TLS).
func (c *cluster) joinAddrs(n *nodeProc) string {
	var out []string
	for _, m := range c.nodes {
		if m != n {
			out = append(out, m.httpAddr())
		}
	}
	return strings.Join(out, ",")
}

// adminClient is a client of the members with the management token (ACLs
// on) and the run's TLS.
func (c *cluster) adminClient() (*client.Client, error) {
	var addrs []string
	for _, n := range c.nodes {
		if n.serving() {
			addrs = append(addrs, c.apiAddr(n))
		}
	}
	return client.NewClient(addrs, client.WithTLS(c.clientTLS), client.WithToken(c.admin),
		client.WithRequestTimeout(5*time.Second))
}

// admin runs f with an admin client, bounded by 20 s.
func (c *cluster) adminCall(ctx context.Context, f func(ctx context.Context, cl *client.Client) error) error {
	cl, err := c.adminClient()
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return f(actx, cl)
}

// wipe deletes n's data dir (n is stopped): it can come back only as a
// new member, with --join. On a disk of the disk faults, the deletion is
// made durable at once: crashfs keeps removed files until a crash (or a
// sync), and a real disk would have freed their space (repeated repairs
// otherwise filled its tmpfs with old raft-wal segments).
func (c *cluster) wipe(n *nodeProc) error {
	if err := os.RemoveAll(n.dataDir); err != nil {
		return fmt.Errorf("wipe %s: %w", n.id, err)
	}
	if n.disk != nil {
		if err := n.disk.fs.Sync(); err != nil {
			return fmt.Errorf("wipe %s: %w", n.id, err)
		}
	}
	n.join = true
	return nil
}

// bringIn starts n (wiped, or a spare) with --join and waits until the
// cluster lists it as a voter and it follows the leader.
func (c *cluster) bringIn(ctx context.Context, n *nodeProc) error {
	n.join = true
	if err := c.start(n); err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	for {
		var ms []api.Member
		err := c.adminCall(jctx, func(ctx context.Context, cl *client.Client) error {
			var err error
			ms, err = cl.Members(ctx)
			return err
		})
		if err == nil && slices.ContainsFunc(ms, func(m api.Member) bool { return m.ID == n.id && m.Voter }) {
			break
		}
		if !sleep(jctx, 200*time.Millisecond) {
			if ctx.Err() != nil {
				return fmt.Errorf("the run ended before %s became a voter", n.id)
			}
			return fmt.Errorf("%s did not become a voter within %v (last: %v)", n.id, joinTimeout, err)
		}
	}
	return c.waitSettled(jctx)
}

// swap makes spare in a member in place of out, which becomes a spare.
func (c *cluster) swap(out, in *nodeProc) {
	for i, m := range c.nodes {
		if m == out {
			c.nodes[i] = in
		}
	}
	for i, s := range c.spares {
		if s == in {
			c.spares[i] = out
		}
	}
}

// transferLeader moves leadership from the leader to a follower picked at
// random (POST /v1/cluster/transfer-leadership), as an operator does
// before maintenance.
func (in *injector) transferLeader(ctx context.Context) (FaultRec, error) {
	ld, f, err := in.leaderAndFollower(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	rec := FaultRec{Kind: faultTransferLeader, Target: ld.id + " -> " + f.id, Start: monoNow(), LeaderLoss: true}
	err = in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		_, err := cl.TransferLeadership(ctx, f.id)
		return err
	})
	rec.End = monoNow()
	if err != nil {
		return FaultRec{}, fmt.Errorf("%w: transfer: %v", errSkipped, err)
	}
	return rec, nil
}

// leaderAndFollower finds the leader and a serving follower picked at
// random (a skip if there is none).
func (in *injector) leaderAndFollower(ctx context.Context) (ld, f *nodeProc, err error) {
	if ld, err = in.findLeader(ctx); err != nil {
		return nil, nil, err
	}
	if f = in.follower(ld); f == nil {
		return nil, nil, fmt.Errorf("%w: no follower up", errSkipped)
	}
	return ld, f, nil
}

// follower picks a serving member other than ld at random (nil if none).
func (in *injector) follower(ld *nodeProc) *nodeProc {
	var fs []*nodeProc
	for _, n := range in.cl.nodes {
		if n != ld && n.serving() {
			fs = append(fs, n)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return fs[in.rng.Intn(len(fs))]
}

// replaceNode replaces a follower by the spare, as an operator replaces a
// dead machine: members remove F, F stopped and its data dir wiped (it
// becomes the next spare), the spare started with --join and waited for
// until it votes. The cluster shrinks by one member, then grows back.
func (in *injector) replaceNode(ctx context.Context) (FaultRec, error) {
	if len(in.cl.spares) == 0 {
		return FaultRec{}, fmt.Errorf("%w: no spare node", errSkipped)
	}
	_, f, err := in.leaderAndFollower(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	spare := in.cl.spares[0]
	rec := FaultRec{Kind: faultReplaceNode, Target: f.id + " -> " + spare.id, Start: monoNow()}
	if err := in.removeAndWipe(ctx, f); err != nil {
		return FaultRec{}, err
	}
	in.cl.swap(f, spare)
	if err := in.cl.bringIn(ctx, spare); err != nil {
		rec.Note = fmt.Sprintf("(%s not back: %v)", spare.id, err)
	}
	rec.End = monoNow()
	return rec, nil
}

// removeLeader removes the leader from the configuration (the others
// elect a new one), then wipes it and brings it back with --join, as a
// new member under its old id.
func (in *injector) removeLeader(ctx context.Context) (FaultRec, error) {
	ld, err := in.findLeader(ctx)
	if err != nil {
		return FaultRec{}, err
	}
	rec := FaultRec{Kind: faultRemoveLeader, Target: ld.id, Start: monoNow(), LeaderLoss: true}
	if err := in.removeAndWipe(ctx, ld); err != nil {
		return FaultRec{}, err
	}
	if err := in.cl.bringIn(ctx, ld); err != nil {
		rec.Note = fmt.Sprintf("(%s not back: %v)", ld.id, err)
	}
	rec.End = monoNow()
	return rec, nil
}

// removeAndWipe removes member n from the configuration (members remove),
// stops it and wipes its data dir; a refused removal skips the fault.
func (in *injector) removeAndWipe(ctx context.Context, n *nodeProc) error {
	if err := in.cl.adminCall(ctx, func(ctx context.Context, cl *client.Client) error {
		return cl.RemoveMember(ctx, n.id, false)
	}); err != nil {
		return fmt.Errorf("%w: remove %s: %v", errSkipped, n.id, err)
	}
	in.cl.stop(n, 5*time.Second)
	if err := in.cl.wipe(n); err != nil {
		in.logf("%v", err)
	}
	return nil
}
