package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// healthTimeout bounds one health probe: a paused node must not hold up
// the schedule.
const healthTimeout = 700 * time.Millisecond

// view is one node's answer to /v1/health.
type view struct {
	node *nodeProc
	info api.HealthInfo
	err  error
}

// views asks every serving node for its view of the leadership, at once.
func (c *cluster) views(ctx context.Context) []view {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out []view
	)
	for _, n := range c.nodes {
		if !n.serving() {
			continue
		}
		wg.Add(1)
		go func(n *nodeProc) {
			defer wg.Done()
			v := view{node: n}
			cl, err := client.NewClient([]string{c.apiAddr(n)}, client.WithRequestTimeout(healthTimeout),
				client.WithTLS(c.clientTLS))
			if err == nil {
				hctx, cancel := context.WithTimeout(ctx, healthTimeout)
				v.info, v.err = cl.Health(hctx)
				cancel()
				cl.CloseIdleConnections()
			} else {
				v.err = err
			}
			mu.Lock()
			out = append(out, v)
			mu.Unlock()
		}(n)
	}
	wg.Wait()
	return out
}

// leaderOf picks the node that says it leads in the highest term.
func leaderOf(vs []view) (*nodeProc, uint64) {
	var (
		best *nodeProc
		term uint64
	)
	for _, v := range vs {
		if v.err == nil && v.info.IsLeader && (best == nil || v.info.Term > term) {
			best, term = v.node, v.info.Term
		}
	}
	return best, term
}

// leader waits until some node leads and returns it.
func (c *cluster) leader(ctx context.Context) (*nodeProc, error) {
	for {
		if n, _ := leaderOf(c.views(ctx)); n != nil {
			return n, nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return nil, fmt.Errorf("no leader: %w", ctx.Err())
		}
	}
}

// waitSettled waits until a leader leads and every serving node follows
// it in the same term.
func (c *cluster) waitSettled(ctx context.Context) error {
	for {
		vs := c.views(ctx)
		ld, term := leaderOf(vs)
		settled := ld != nil
		for _, v := range vs {
			if settled && (v.err != nil || v.info.Term != term || (v.node != ld && v.info.Leader != ld.id)) {
				settled = false
			}
		}
		if settled {
			return nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("cluster did not settle on one leader; last views: %s", describeViews(vs))
		}
	}
}

// describeViews says what each node last answered, for an error message.
func describeViews(vs []view) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString("; ")
		}
		if v.err != nil {
			fmt.Fprintf(&b, "%s: %v", v.node.id, v.err)
			continue
		}
		fmt.Fprintf(&b, "%s: term %d leader %q", v.node.id, v.info.Term, v.info.Leader)
	}
	if len(vs) == 0 {
		return "no node serving"
	}
	return b.String()
}
