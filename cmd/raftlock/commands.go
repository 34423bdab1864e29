package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/api"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport/client"
)

// call runs f with a client and the command's ctx.
func (c *cli) call(ctx context.Context, extra time.Duration, f func(context.Context, *client.Client) error) error {
	cl, ctx, cancel, err := c.client(ctx, extra)
	if err != nil {
		return err
	}
	defer cancel()
	defer cl.CloseIdleConnections()
	return f(ctx, cl)
}

// show runs a command that makes one call (get) and prints its result:
// with -o json as asJSON makes it, as text otherwise; cmd names the
// command in an error.
func show[T any](ctx context.Context, c *cli, cmd string, get func(context.Context, *client.Client) (T, error), asJSON func(T) any, text func(T) error) error {
	return c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
		v, err := get(ctx, cl)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		if c.json() {
			return c.printJSON(asJSON(v))
		}
		return text(v)
	})
}

func (c *cli) lockGet(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		get := func(ctx context.Context, cl *client.Client) (api.LockState, error) {
			return cl.LockState(ctx, pos[0])
		}
		return show(ctx, c, "lock get", get,
			func(l api.LockState) any { return api.NewLockReply(l) }, c.printLock)
	}
}

func (c *cli) lockList(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		prefix := ""
		if len(pos) == 1 {
			prefix = pos[0]
		}
		get := func(ctx context.Context, cl *client.Client) ([]api.LockState, error) { return cl.Locks(ctx, prefix) }
		return show(ctx, c, "lock list", get,
			func(ls []api.LockState) any { return api.NewLocksReply(ls) }, c.printLocks)
	}
}

func (c *cli) sequencerCheck(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		return c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
			chk, err := cl.CheckSequencer(ctx, pos[0])
			if err != nil {
				return fmt.Errorf("sequencer check: %w", err)
			}
			if c.json() {
				err = c.printJSON(api.NewCheckReply(chk))
			} else {
				err = c.printCheck(chk)
			}
			if err == nil && !chk.Valid {
				// Exit 1, so that a script can write "raftlock sequencer
				// check "$SEQ" && write".
				err = &codeError{code: "stale_sequencer", err: fmt.Errorf("the sequencer is not current: %s", pos[0])}
			}
			return err
		})
	}
}

func (c *cli) sessionOpen(fs *flag.FlagSet) runFunc {
	var req api.OpenRequest
	fs.DurationVar(&req.TTL, "ttl", api.DefaultTTL, "the session's lease: 1s to 5m")
	fs.DurationVar(&req.LockDelay, "lock-delay", api.DefaultLockDelay, "how long its locks stay unavailable after it expires: 0s (none) to 1m")
	fs.StringVar(&req.Name, "name", "", "a descriptive name `N`")
	return func(ctx context.Context, _ []string) error {
		// The flags have defaults, so a zero --ttl is a mistake, not "the
		// server's default"; a zero --lock-delay means none.
		if err := api.CheckTTL("--ttl", req.TTL); err != nil {
			return badFlag("session open", err)
		}
		if err := api.CheckLockDelay("--lock-delay", req.LockDelay); err != nil {
			return badFlag("session open", err)
		}
		if req.LockDelay == 0 {
			req.LockDelay = api.NoLockDelay // --lock-delay 0s asks for none
		}
		return c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
			info, err := cl.OpenSession(ctx, req)
			if err != nil {
				return fmt.Errorf("session open: %w", err)
			}
			if c.json() {
				return c.printJSON(api.OpenSessionReply{ID: info.ID, TTL: info.TTL.String(), LockDelay: info.LockDelay.String()})
			}
			return c.printf("%s\n", info.ID)
		})
	}
}

func (c *cli) sessionKeepAlive(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		get := func(ctx context.Context, cl *client.Client) (api.KeepAliveAnswer, error) {
			return cl.KeepAlive(ctx, pos[0])
		}
		return show(ctx, c, "session keepalive", get,
			func(a api.KeepAliveAnswer) any { return api.NewKeepAliveReply(a) },
			func(a api.KeepAliveAnswer) error {
				for _, g := range a.Revoked {
					if err := c.printf("revoked %s holder %s token %d (%s): %s\n", g.Name, g.Holder, g.Token, g.Kind, g.Reason); err != nil {
						return err
					}
				}
				return c.printf("%s\n", a.TTL)
			})
	}
}

func (c *cli) sessionGet(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		get := func(ctx context.Context, cl *client.Client) (api.Info, error) { return cl.SessionInfo(ctx, pos[0]) }
		return show(ctx, c, "session get", get,
			func(info api.Info) any { return api.NewSessionReply(info) }, c.printSession)
	}
}

func (c *cli) sessionClose(fs *flag.FlagSet) runFunc {
	reason := fs.String("reason", "", "why (required when closing by HANDLE)")
	return func(ctx context.Context, pos []string) error {
		if len(pos[0]) == api.SessionHandleLen {
			return c.closeByHandle(ctx, pos[0], *reason)
		}
		get := func(ctx context.Context, cl *client.Client) (struct{}, error) {
			return struct{}{}, cl.CloseSession(ctx, pos[0])
		}
		return show(ctx, c, "session close", get,
			func(struct{}) any { return api.CloseReply{Closed: true} },
			func(struct{}) error { return c.printf("closed %s\n", pos[0]) })
	}
}

// randomHolder draws a holder id: 16 random hex digits.
func randomHolder() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random holder id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (c *cli) acquire(fs *flag.FlagSet) runFunc {
	var req api.AcquireRequest
	var shared bool
	fs.StringVar(&req.Session, "session", "", "the session's `ID` (required)")
	fs.StringVar(&req.Holder, "holder", "", "the holder id `H` (default: random, printed)")
	fs.BoolVar(&shared, "shared", false, "take a shared (reader) lock")
	fs.DurationVar(&req.Wait, "wait", 0, "how long to wait in the lock's queue: 0s (try once) to 10m")
	fs.StringVar(&req.Value, "value", "", "a value `V` to set on the lock")
	fs.DurationVar(&req.MaxHold, "max-hold", 0, "the grant's hold limit `D`: 1s to 24h (0: none); the cluster revokes it then")
	fs.Uint64Var(&req.Permits, "permits", 0, "take one of `N` slots of a semaphore (1 to 256; every holder must pass the same N)")
	return func(ctx context.Context, pos []string) error {
		if req.Session == "" {
			return usagef("acquire", "--session is required")
		}
		if req.MaxHold != 0 {
			if err := api.CheckDuration("--max-hold", req.MaxHold, api.MinMaxHold, api.MaxMaxHold); err != nil {
				return badFlag("acquire", err)
			}
		}
		if err := api.CheckWait("--wait", req.Wait); err != nil {
			return badFlag("acquire", err)
		}
		req.Name = pos[0]
		req.Mode = sequencer.Exclusive
		if shared {
			req.Mode = sequencer.Shared
		}
		if err := api.CheckPermits(req.Permits, req.Mode); err != nil {
			return badFlag("acquire", fmt.Errorf("--permits: %w", err))
		}
		if req.Holder == "" {
			var err error
			if req.Holder, err = randomHolder(); err != nil {
				return err
			}
		}
		return c.call(ctx, req.Wait, func(ctx context.Context, cl *client.Client) error {
			g, err := cl.Acquire(ctx, req)
			if err != nil {
				return fmt.Errorf("acquire %s: %w", req.Name, err)
			}
			if c.json() {
				return c.printJSON(struct {
					api.GrantReply
					Holder string `json:"holder"`
				}{api.NewGrantReply(g), req.Holder})
			}
			if g.Permits > 0 {
				return c.printf("token: %d\nsequencer: %s\nholder: %s\nslot: %d of %d\n", g.Token, g.Sequencer, req.Holder, g.Slot, g.Permits)
			}
			return c.printf("token: %d\nsequencer: %s\nholder: %s\n", g.Token, g.Sequencer, req.Holder)
		})
	}
}

func (c *cli) release(fs *flag.FlagSet) runFunc {
	var req api.ReleaseRequest
	fs.StringVar(&req.Session, "session", "", "the session's `ID` (required)")
	fs.StringVar(&req.Holder, "holder", "", "the holder id `H` (required)")
	return func(ctx context.Context, pos []string) error {
		if req.Session == "" || req.Holder == "" {
			return usagef("release", "--session and --holder are required")
		}
		req.Name = pos[0]
		get := func(ctx context.Context, cl *client.Client) (struct{}, error) {
			return struct{}{}, cl.Release(ctx, req)
		}
		return show(ctx, c, "release "+req.Name, get,
			func(struct{}) any { return api.ReleaseReply{Released: true} },
			func(struct{}) error { return c.printf("released %s\n", req.Name) })
	}
}
