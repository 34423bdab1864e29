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

const lockRevokeHelp = `Revokes one grant of the lock NAME (admin): the one of holder id --holder,
or of the session --session-handle (give both when several sessions share a
holder id). The grant ends at once: its sequencer no longer checks valid. The
holder's session stays open; its client learns at its next keepalive (the Go
client closes that lock's Lost(), and exec kills its command). The lock goes to
the next waiter only after the holder's session ttl + lock-delay, the longest
its client can go on believing it holds it. --reason is required (up to 256
bytes) and is shown to the holder, on the status page and in the log.`

func (c *cli) lockRevoke(fs *flag.FlagSet) runFunc {
	var req api.RevokeRequest
	fs.StringVar(&req.Holder, "holder", "", "the holder id `H` of the grant")
	fs.StringVar(&req.SessionHandle, "session-handle", "", "the `HANDLE` of the holder's session")
	fs.StringVar(&req.Reason, "reason", "", "why (required; shown to the holder)")
	return func(ctx context.Context, pos []string) error {
		req.Name = pos[0]
		if err := req.Check(); err != nil {
			return badFlag("lock revoke", err)
		}
		get := func(ctx context.Context, cl *client.Client) (api.Revocation, error) { return cl.RevokeGrant(ctx, req) }
		return show(ctx, c, "lock revoke", get,
			func(r api.Revocation) any {
				return api.RevokeReply{Revoked: true, Name: r.Name, Holder: r.Holder, SessionHandle: r.SessionHandle,
					SessionName: r.SessionName, Token: uint64(r.Token), Unavailable: r.Unavailable.String()}
			},
			func(r api.Revocation) error {
				return c.printf("revoked %s holder %s (session %s) token %d; the lock is unavailable for %s\n",
					r.Name, r.Holder, r.SessionHandle, r.Token, r.Unavailable)
			})
	}
}

func (c *cli) sessionList(fs *flag.FlagSet) runFunc {
	var q api.SessionsQuery
	fs.StringVar(&q.Name, "name", "", "only the sessions named `N`")
	fs.StringVar(&q.Handle, "handle", "", "only the session of handle `HANDLE`")
	return func(ctx context.Context, _ []string) error {
		if err := q.Check(); err != nil {
			return badFlag("session list", err)
		}
		get := func(ctx context.Context, cl *client.Client) (api.SessionsReply, error) { return cl.Sessions(ctx, q) }
		return show(ctx, c, "session list", get, func(r api.SessionsReply) any { return r }, c.printSessions)
	}
}

func (c *cli) printSessions(r api.SessionsReply) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HANDLE\tNAME\tTTL\tLOCK-DELAY\tCREATED\tLOCKS")
	for _, s := range r.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Handle, s.Name, s.TTL, s.LockDelay, s.Created, strings.Join(s.Locks, ","))
	}
	tw.Flush()
	if r.Truncated {
		fmt.Fprintf(&b, "(only the first %d; narrow with --name)\n", api.MaxSessionsListed)
	}
	return c.printf("%s", b.String())
}

// closeByHandle closes a session by its handle (admin), for "session
// close HANDLE".
func (c *cli) closeByHandle(ctx context.Context, handle, reason string) error {
	req := api.CloseByHandleRequest{Handle: handle, Reason: reason}
	if err := req.Check(); err != nil {
		return badFlag("session close", err)
	}
	get := func(ctx context.Context, cl *client.Client) (api.ClosedSession, error) {
		return cl.CloseSessionByHandle(ctx, req)
	}
	return show(ctx, c, "session close", get,
		func(r api.ClosedSession) any {
			return api.CloseByHandleReply{Closed: true, Handle: r.Handle, Name: r.Name, Locks: r.Locks, Unavailable: r.Unavailable.String()}
		},
		func(r api.ClosedSession) error {
			return c.printf("closed session %s (%s); its %d lock(s) are unavailable for %s\n", r.Handle, r.Name, len(r.Locks), r.Unavailable)
		})
}

func (c *cli) lockRequestRelease(fs *flag.FlagSet) runFunc {
	var req api.RequestReleaseRequest
	fs.StringVar(&req.Session, "session", "", "the asking session's `ID` (required)")
	fs.StringVar(&req.Holder, "holder", "requester", "the asker's holder id `H`")
	return func(ctx context.Context, pos []string) error {
		if req.Session == "" {
			return usagef("lock request-release", "--session is required")
		}
		req.Name = pos[0]
		if err := req.Check(); err != nil {
			return badFlag("lock request-release", err)
		}
		get := func(ctx context.Context, cl *client.Client) (api.RequestReleaseReply, error) {
			return api.RequestReleaseReply{Requested: true}, cl.RequestRelease(ctx, req)
		}
		return show(ctx, c, "lock request-release", get, func(r api.RequestReleaseReply) any { return r },
			func(api.RequestReleaseReply) error {
				return c.printf("asked the holders of %s to release it\n", req.Name)
			})
	}
}
