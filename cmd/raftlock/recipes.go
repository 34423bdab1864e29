package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport"
)

// leaderReply is the JSON form of an election's leader.
type leaderReply struct {
	Election  string `json:"election"`
	Value     string `json:"value"`
	Session   string `json:"session"`
	Token     uint64 `json:"token"`
	Sequencer string `json:"sequencer"`
}

func newLeaderReply(l session.Leader) leaderReply {
	return leaderReply{Election: l.Election, Value: l.Value, Session: l.Session, Token: uint64(l.Token()), Sequencer: l.Sequencer.String()}
}

func (c *cli) printLeader(verb string, l session.Leader) error {
	if c.json {
		return c.printJSON(newLeaderReply(l))
	}
	return c.printf("%s: %s value %q token %d sequencer %s\n", verb, l.Election, l.Value, l.Token(), l.Sequencer)
}

// elect runs "raftlock elect NAME VALUE": campaign, print when elected,
// hold the leadership until interrupted (then resign), exit 1 if it is lost.
func (c *cli) elect(ctx context.Context, args []string) error {
	fs, o := c.execFlags()
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	if o.shared {
		return usagef("elect: an election is exclusive; --shared makes no sense")
	}
	if err := o.validate("elect"); err != nil {
		return err
	}
	name, value := pos[0], pos[1]
	o.value = value
	cl, err := transport.NewClient(c.addrs)
	if err != nil {
		return usagef("--addr: %v", err)
	}
	defer cl.CloseIdleConnections()
	fmt.Fprintf(c.stderr, "raftlock: campaigning for %s as %q\n", name, value)
	s, l, err := c.takeLock(ctx, cl, name, o)
	if err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	elected := session.Leader{Election: name, Value: value, Session: s.ID(), Sequencer: l.Sequencer()}
	if err := c.printLeader("elected", elected); err != nil {
		return err
	}
	select {
	case <-ctx.Done(): // interrupted: resign, so the next campaigner takes over at once
		rctx, cancel := context.WithTimeout(bg, c.resignTimeout())
		defer cancel()
		if err := l.Unlock(rctx); err != nil {
			return fmt.Errorf("elect: resign: %w", err)
		}
		_ = s.Close(rctx)
		fmt.Fprintf(c.stderr, "raftlock: resigned %s\n", name)
		return nil
	case <-l.Lost():
		return api.Errorf(api.CodeSessionNotFound, "leadership of %s lost (session %s %s)", name, s.ID(), s.State())
	}
}

// resignTimeout bounds the resignation after an interrupt.
func (c *cli) resignTimeout() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return 10 * time.Second
}

// leader runs "raftlock leader [--observe] NAME".
func (c *cli) leader(ctx context.Context, args []string) error {
	fs := c.flags("leader")
	observe := fs.Bool("observe", false, "keep printing each new leader until interrupted")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	name := pos[0]
	if *observe {
		return c.stream(ctx, func(ctx context.Context, cl *transport.Client) error {
			ch, err := session.Observe(ctx, cl, name)
			if err != nil {
				return err
			}
			for l := range ch {
				if err := c.printLeader("leader", l); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return c.call(ctx, 0, func(ctx context.Context, cl *transport.Client) error {
		l, err := session.CurrentLeader(ctx, cl, name)
		if err != nil {
			return err
		}
		return c.printLeader("leader", l)
	})
}

// lockWatch runs "raftlock lock watch NAME": print the lock's state, then
// each change, until interrupted.
func (c *cli) lockWatch(ctx context.Context, args []string) error {
	pos, err := parse(c.flags("lock watch"), args, 1, 1)
	if err != nil {
		return err
	}
	return c.stream(ctx, func(ctx context.Context, cl *transport.Client) error {
		ch, err := session.Watch(ctx, cl, pos[0])
		if err != nil {
			return err
		}
		for st := range ch {
			if c.json {
				err = c.printJSON(transport.NewLockReply(st))
			} else {
				err = c.printLock(st)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// stream runs a command that prints until interrupted: --timeout does not
// apply, and the interrupt is a normal end.
func (c *cli) stream(ctx context.Context, f func(context.Context, *transport.Client) error) error {
	cl, err := transport.NewClient(c.addrs)
	if err != nil {
		return usagef("--addr: %v", err)
	}
	defer cl.CloseIdleConnections()
	err = f(ctx, cl)
	if ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())) {
		return nil
	}
	return err
}
