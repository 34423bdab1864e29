package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/sequencer"
	"github.com/raftlock/raftlock/transport"
)

// call runs f with a client and the command's ctx.
func (c *cli) call(ctx context.Context, extra time.Duration, f func(context.Context, *transport.Client) error) error {
	cl, ctx, cancel, err := c.client(ctx, extra)
	if err != nil {
		return err
	}
	defer cancel()
	defer cl.CloseIdleConnections()
	return f(ctx, cl)
}

func (c *cli) status(ctx context.Context, args []string) error {
	if _, err := parse(c.flags("status"), args, 0, 0); err != nil {
		return err
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		info, err := cl.Cluster(ctx)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		if c.json {
			return c.printJSON(info)
		}
		return c.printCluster(info)
	})
}

func (c *cli) lockGet(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("lock get"), args, 1, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		l, err := cl.LockState(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("lock get: %w", err)
		}
		if c.json {
			return c.printJSON(transport.NewLockReply(l))
		}
		return c.printLock(l)
	})
}

func (c *cli) lockList(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("lock list"), args, 0, 1)
	if err != nil {
		return err
	}
	prefix := ""
	if len(pos) == 1 {
		prefix = pos[0]
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		ls, err := cl.Locks(ctx, prefix)
		if err != nil {
			return fmt.Errorf("lock list: %w", err)
		}
		if c.json {
			return c.printJSON(transport.NewLocksReply(ls))
		}
		return c.printLocks(ls)
	})
}

func (c *cli) sequencerCheck(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("sequencer check"), args, 1, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		chk, err := cl.CheckSequencer(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("sequencer check: %w", err)
		}
		if c.json {
			err = c.printJSON(transport.NewCheckReply(chk))
		} else {
			err = c.printCheck(chk)
		}
		if err == nil && !chk.Valid {
			err = fmt.Errorf("%w: %s", errStaleSequencer, pos[0])
		}
		return err
	})
}

// errStaleSequencer makes "sequencer check" exit 1 when the sequencer is no
// longer current, so that a script can write "raftlock sequencer check
// "$SEQ" && write".
var errStaleSequencer = errors.New("the sequencer is not current")

func (c *cli) sessionOpen(ctx context.Context, args []string) error {
	fs := c.flags("session open")
	var req api.OpenRequest
	fs.DurationVar(&req.TTL, "ttl", api.DefaultTTL, "the session's lease")
	fs.DurationVar(&req.LockDelay, "lock-delay", api.DefaultLockDelay, "how long its locks stay unavailable after it expires (0s: none)")
	fs.StringVar(&req.Name, "name", "", "a descriptive name")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
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
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		info, err := cl.OpenSession(ctx, req)
		if err != nil {
			return fmt.Errorf("session open: %w", err)
		}
		if c.json {
			return c.printJSON(transport.OpenSessionReply{ID: info.ID, TTL: info.TTL.String(), LockDelay: info.LockDelay.String()})
		}
		return c.printf("%s\n", info.ID)
	})
}

func (c *cli) sessionKeepAlive(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("session keepalive"), args, 1, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		ttl, err := cl.KeepAlive(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("session keepalive: %w", err)
		}
		if c.json {
			return c.printJSON(transport.KeepAliveReply{TTL: ttl.String()})
		}
		return c.printf("%s\n", ttl)
	})
}

func (c *cli) sessionGet(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("session get"), args, 1, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		info, err := cl.SessionInfo(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("session get: %w", err)
		}
		if c.json {
			return c.printJSON(transport.NewSessionReply(info))
		}
		return c.printSession(info)
	})
}

func (c *cli) sessionClose(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("session close"), args, 1, 1)
	if err != nil {
		return err
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		if err := cl.CloseSession(ctx, pos[0]); err != nil {
			return fmt.Errorf("session close: %w", err)
		}
		if c.json {
			return c.printJSON(transport.CloseReply{Closed: true})
		}
		return c.printf("closed %s\n", pos[0])
	})
}

// randomHolder draws a holder id: 16 random hex digits.
func randomHolder() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random holder id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (c *cli) acquire(ctx context.Context, args []string) error {
	fs := c.flags("acquire")
	var req api.AcquireRequest
	var shared bool
	fs.StringVar(&req.Session, "session", "", "the session's id (required)")
	fs.StringVar(&req.Holder, "holder", "", "the holder id (default: random, printed)")
	fs.BoolVar(&shared, "shared", false, "take a shared (reader) lock")
	fs.DurationVar(&req.Wait, "wait", 0, "wait up to this long in the lock's queue (0: try once)")
	fs.StringVar(&req.Value, "value", "", "a value to set on the lock")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if req.Session == "" {
		return usagef("acquire: --session is required")
	}
	if err := api.CheckWait("--wait", req.Wait); err != nil {
		return badFlag("acquire", err)
	}
	req.Name = pos[0]
	req.Mode = sequencer.Exclusive
	if shared {
		req.Mode = sequencer.Shared
	}
	if req.Holder == "" {
		if req.Holder, err = randomHolder(); err != nil {
			return err
		}
	}
	return c.call(ctx, req.Wait, func(ctx context.Context, cl *transport.Client) error {
		g, err := cl.Acquire(ctx, req)
		if err != nil {
			return fmt.Errorf("acquire %s: %w", req.Name, err)
		}
		if c.json {
			return c.printJSON(struct {
				transport.GrantReply
				Holder string `json:"holder"`
			}{transport.NewGrantReply(g), req.Holder})
		}
		return c.printf("token: %d\nsequencer: %s\nholder: %s\n", g.Token, g.Sequencer, req.Holder)
	})
}

func (c *cli) release(ctx context.Context, args []string) error {
	fs := c.flags("release")
	var req api.ReleaseRequest
	fs.StringVar(&req.Session, "session", "", "the session's id (required)")
	fs.StringVar(&req.Holder, "holder", "", "the holder id (required)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if req.Session == "" || req.Holder == "" {
		return usagef("release: --session and --holder are required")
	}
	req.Name = pos[0]
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		if err := cl.Release(ctx, req); err != nil {
			return fmt.Errorf("release %s: %w", req.Name, err)
		}
		if c.json {
			return c.printJSON(transport.ReleaseReply{Released: true})
		}
		return c.printf("released %s\n", req.Name)
	})
}
