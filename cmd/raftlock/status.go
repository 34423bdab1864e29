package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// memberTimeout bounds the health call status makes to each member.
const memberTimeout = 2 * time.Second

// clusterTimeout bounds how long status looks for a leader to ask for the
// members (at most --timeout): long enough to ride out an election, short
// enough that a cluster without quorum is reported in seconds.
// (--timeout 0s, never give up, waits for a leader.)
const clusterTimeout = 3 * time.Second

// statusReport is what status prints (-o json: this object): the
// cluster as the leader sees it (client.ClusterInfo's fields) and each
// member's own view, asked of the member itself.
type statusReport struct {
	Leader      string         `json:"leader"`
	Term        uint64         `json:"term"`
	Serving     bool           `json:"serving"`
	CommitIndex uint64         `json:"commit_index"`
	Members     []memberStatus `json:"members"`
	// Error says why the leader could not be asked (no quorum): the
	// members are then the addresses status was given.
	Error string `json:"error,omitempty"`
}

// memberStatus is one member in statusReport.
type memberStatus struct {
	api.Member
	// State is leader, follower (or candidate, unhealthy) as the member
	// says, or unreachable.
	State   string `json:"state"`
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"`
	// LastContactMillis: how long ago a follower heard from its leader.
	LastContactMillis *int64 `json:"last_contact_ms,omitempty"`
	AppliedIndex      uint64 `json:"applied_index,omitempty"`
	// Lag is how many entries it has applied fewer than the leader.
	Lag *uint64 `json:"lag,omitempty"`
}

// status asks the leader (through any node) for the members, then every
// member for its own health, and prints one line per member.
func (c *cli) status(*flag.FlagSet) runFunc {
	return func(ctx context.Context, _ []string) error {
		var rep statusReport
		err := c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
			if c.timeout > clusterTimeout { // --timeout 0s: never give up
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, clusterTimeout)
				defer cancel()
			}
			info, err := cl.Cluster(ctx)
			if err != nil {
				return err
			}
			rep = statusReport{Leader: info.Leader, Term: info.Term, Serving: info.Serving, CommitIndex: info.CommitIndex}
			for _, m := range info.Members {
				rep.Members = append(rep.Members, memberStatus{Member: m})
			}
			return nil
		})
		var clusterErr error
		if err != nil {
			if api.CodeOf(err) == api.CodeUnreachable || ctx.Err() != nil {
				return fmt.Errorf("status: %w", err)
			}
			// No leader to ask: report what each given address says.
			clusterErr = err
			rep = statusReport{Error: err.Error()}
			for _, a := range c.addrs {
				rep.Members = append(rep.Members, memberStatus{Member: api.Member{HTTPAddr: a}})
			}
		}
		c.askMembers(ctx, &rep)
		if c.json() {
			err = c.printJSON(rep)
		} else {
			err = c.printStatus(rep)
		}
		if err == nil && clusterErr != nil {
			err = fmt.Errorf("status: the leader could not be asked: %w", clusterErr)
		}
		if err == nil {
			err = noQuorum(rep)
		}
		return err
	}
}

// askMembers fills in each member's health, asked of the member itself,
// all at once, and their lag behind the leader's applied index (the
// commit index when the leader did not answer).
func (c *cli) askMembers(ctx context.Context, rep *statusReport) {
	var wg sync.WaitGroup
	for i := range rep.Members {
		m := &rep.Members[i]
		if m.HTTPAddr == "" {
			// A member registers its HTTP address with the leader once it
			// follows it: a second or two after a bootstrap or a join.
			m.State, m.Reason = "joining", "its HTTP address is not recorded yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.askMember(ctx, m)
		}()
	}
	wg.Wait()
	top := rep.CommitIndex
	for _, m := range rep.Members {
		if m.State == "leader" && m.AppliedIndex > 0 {
			top = m.AppliedIndex
		}
	}
	for i := range rep.Members {
		m := &rep.Members[i]
		if m.State == "unreachable" || m.State == "joining" || m.AppliedIndex == 0 || top == 0 {
			continue
		}
		lag := uint64(0)
		if top > m.AppliedIndex {
			lag = top - m.AppliedIndex
		}
		m.Lag = &lag
	}
}

// askMember asks one member for its health.
func (c *cli) askMember(ctx context.Context, m *memberStatus) {
	cl, err := c.dialAddr(c.memberURL(m.HTTPAddr))
	if err != nil {
		m.State, m.Reason = "unreachable", err.Error()
		return
	}
	defer cl.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, memberTimeout)
	defer cancel()
	h, err := cl.Health(ctx)
	if err != nil {
		m.State, m.Reason = "unreachable", err.Error()
		return
	}
	if m.ID == "" {
		m.ID = h.Node
	}
	m.Healthy, m.Reason, m.AppliedIndex = h.OK, h.Reason, h.AppliedIndex
	switch {
	case h.IsLeader:
		m.State = "leader"
	case h.Leader == "" && !h.OK:
		m.State = "candidate"
	default:
		m.State = "follower"
		lc := h.LastContactMillis
		m.LastContactMillis = &lc
	}
}

// memberURL is the address the CLI asks a member at: a member records its
// HTTP address as host:port, without a scheme, so in a TLS cluster (the
// CLI was given https:// addresses, or a CA) it is https://host:port.
func (c *cli) memberURL(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	tls := c.caFile != ""
	for _, a := range c.addrs {
		tls = tls || strings.HasPrefix(a, "https://")
	}
	if tls {
		return "https://" + addr
	}
	return addr
}

// noQuorum returns an error when a majority of the members is unreachable:
// the cluster cannot serve, and status exits non-zero. A joining member
// (in the configuration, its HTTP address not recorded yet) is not counted:
// it follows the leader, it has just not said where it listens.
func noQuorum(rep statusReport) error {
	down := 0
	for _, m := range rep.Members {
		if m.State == "unreachable" {
			down++
		}
	}
	if n := len(rep.Members); n > 0 && down > n/2 {
		return api.Errorf(api.CodeUnreachable, "status: %d of %d members unreachable: the cluster has no quorum", down, n)
	}
	return nil
}

// dialAddr returns a client of one address, with the CLI's TLS and token.
func (c *cli) dialAddr(addr string) (*client.Client, error) {
	return c.dialTo([]string{addr}, client.WithFailFast(failFast), client.WithRequestTimeout(memberTimeout))
}

// printStatus prints a statusReport as text.
func (c *cli) printStatus(rep statusReport) error {
	var b strings.Builder
	if rep.Error != "" {
		fmt.Fprintf(&b, "leader: (unknown: %s)\n", rep.Error)
	} else {
		fmt.Fprintf(&b, "leader: %s\nterm: %d\ncommit index: %d\n", orNone(rep.Leader), rep.Term, rep.CommitIndex)
	}
	b.WriteString("members:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSTATE\tHEALTH\tLAST CONTACT\tAPPLIED\tLAG\tRAFT\tHTTP\tROLE")
	for _, m := range rep.Members {
		role := "non-voter"
		if m.Voter {
			role = "voter"
		}
		if rep.Error != "" {
			role = "-"
		} else if m.ID == rep.Leader {
			role += ", leader"
		}
		health := "ok"
		switch {
		case m.State == "unreachable" || m.State == "joining":
			health = "-"
		case !m.Healthy:
			health = "unhealthy: " + m.Reason
		}
		contact, applied, lag := "-", "-", "-"
		if m.LastContactMillis != nil {
			contact = (time.Duration(*m.LastContactMillis) * time.Millisecond).String()
		}
		if m.AppliedIndex > 0 {
			applied = fmt.Sprint(m.AppliedIndex)
		}
		if m.Lag != nil {
			lag = fmt.Sprint(*m.Lag)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orNone(m.ID), m.State, health, contact, applied, lag,
			orNone(m.RaftAddr), orNone(m.HTTPAddr), role)
	}
	_ = tw.Flush()
	return c.printf("%s", b.String())
}
