package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// The members group (list, add, remove) and leader-transfer: membership
// and leadership, admin calls.

const membersAddHelp = `Adds a node to the cluster (admin): a voter, first replicated to as a
non-voter until it has caught up, or with --nonvoter a non-voter. Its HTTP
address is recorded at once, so followers forward to it as soon as it leads.
Start the node first, with an empty data dir and --join (which also asks to
be added: then this command is not needed). Adding a member as it is changes
nothing; a member's address or role can be changed this way. Example:

  raftlock members add --raft-addr 10.0.0.4:7101 --http-addr 10.0.0.4:7001 n4`

const membersRemoveHelp = `Removes a member from the cluster (admin). It is refused with
invalid_argument when fewer than 2 voters would remain, unless --force. The
removed node is no longer replicated to; stop it (and wipe its data dir
before it joins again). Replacing a dead n3 by n4: start n4 with --join,
then raftlock members remove n3.`

const leaderTransferHelp = `Asks the leader to hand leadership to voter ID (without ID, to the most
up-to-date voter), and prints the old and the new leader. Sessions survive a
transfer as they survive a failover; requests meanwhile get no_leader, which
clients retry. raftlockd transfers leadership by itself when a leader gets
SIGTERM.`

func (c *cli) membersList(*flag.FlagSet) runFunc {
	return func(ctx context.Context, _ []string) error {
		get := func(ctx context.Context, cl *client.Client) ([]api.Member, error) { return cl.Members(ctx) }
		return show(ctx, c, "members list", get,
			func(ms []api.Member) any { return api.MembersReply{Members: ms} }, c.printMembers)
	}
}

func (c *cli) membersAdd(fs *flag.FlagSet) runFunc {
	var m api.Member
	var nonvoter bool
	fs.StringVar(&m.RaftAddr, "raft-addr", "", "the node's Raft `HOST:PORT` (its --raft-addr or --raft-advertise)")
	fs.StringVar(&m.HTTPAddr, "http-addr", "", "the node's HTTP API `HOST:PORT` (its --http-addr)")
	fs.BoolVar(&nonvoter, "nonvoter", false, "add it as a non-voter")
	return func(ctx context.Context, pos []string) error {
		if m.RaftAddr == "" || m.HTTPAddr == "" {
			return usagef("members add", "--raft-addr and --http-addr are required")
		}
		m.ID, m.Voter = pos[0], !nonvoter
		get := func(ctx context.Context, cl *client.Client) (api.Member, error) {
			return m, cl.AddMember(ctx, m)
		}
		return show(ctx, c, "members add", get, func(m api.Member) any { return m },
			func(m api.Member) error { return c.printf("added %s (%s)\n", m.ID, role(m.Voter)) })
	}
}

func (c *cli) membersRemove(fs *flag.FlagSet) runFunc {
	var force bool
	fs.BoolVar(&force, "force", false, "remove it even if fewer than 2 voters remain")
	return func(ctx context.Context, pos []string) error {
		get := func(ctx context.Context, cl *client.Client) (api.DeletedReply, error) {
			return api.DeletedReply{Deleted: true}, cl.RemoveMember(ctx, pos[0], force)
		}
		return show(ctx, c, "members remove", get, func(r api.DeletedReply) any { return r },
			func(api.DeletedReply) error { return c.printf("removed %s\n", pos[0]) })
	}
}

func (c *cli) leaderTransfer(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		to := ""
		if len(pos) == 1 {
			to = pos[0]
		}
		get := func(ctx context.Context, cl *client.Client) (api.TransferReply, error) {
			return cl.TransferLeadership(ctx, to)
		}
		return show(ctx, c, "leader-transfer", get, func(r api.TransferReply) any { return r },
			func(r api.TransferReply) error {
				return c.printf("leadership moved from %s to %s\n", r.From, orNone(r.To))
			})
	}
}

func role(voter bool) string {
	if voter {
		return "voter"
	}
	return "non-voter"
}

func (c *cli) printMembers(ms []api.Member) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT\tHTTP\tROLE")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, orNone(m.HTTPAddr), role(m.Voter))
	}
	_ = tw.Flush()
	return c.printf("%s", b.String())
}
