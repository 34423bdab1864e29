package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

// leaderReply is the JSON form of an election's leader. Its session is
// named by its handle and name, never by its id.
type leaderReply struct {
	Election      string `json:"election"`
	Value         string `json:"value"`
	SessionHandle string `json:"session_handle"`
	SessionName   string `json:"session_name"`
	Token         uint64 `json:"token"`
	Sequencer     string `json:"sequencer"`
}

func newLeaderReply(l session.Leader) leaderReply {
	return leaderReply{Election: l.Election, Value: l.Value, SessionHandle: l.SessionHandle, SessionName: l.SessionName,
		Token: uint64(l.Token()), Sequencer: l.Sequencer.String()}
}

func (c *cli) printLeader(verb string, l session.Leader) error {
	if c.json() {
		return c.printJSON(newLeaderReply(l))
	}
	return c.printf("%s: %s value %q token %d sequencer %s\n", verb, l.Election, l.Value, l.Token(), l.Sequencer)
}

// elect runs "raftlock elect NAME VALUE": campaign, print when elected,
// hold the leadership until interrupted (then resign), exit 1 if it is lost.
func (c *cli) elect(fs *flag.FlagSet) runFunc {
	o := sessionFlags(fs)
	return func(ctx context.Context, pos []string) error {
		return c.campaign(ctx, o, pos[0], pos[1])
	}
}

// campaign runs elect for the election name with value.
func (c *cli) campaign(ctx context.Context, o *execOptions, name, value string) error {
	if err := o.validate("elect"); err != nil {
		return err
	}
	o.value = value
	cl, err := c.longClient(ctx)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	fmt.Fprintf(c.stderr, "raftlock: campaigning for %s as %q\n", name, value)
	s, l, err := c.takeLock(ctx, cl, "elect", name, o)
	if err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	elected := session.Leader{Election: name, Value: value, SessionHandle: s.Handle(), SessionName: s.Name(),
		Sequencer: l.Sequencer()}
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
		return &codeError{code: "lock_lost", err: fmt.Errorf("leadership of %s lost: %s", name, lossReason(s, nil, s.Events()))}
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
func (c *cli) leader(fs *flag.FlagSet) runFunc {
	observe := fs.Bool("observe", false, "keep printing each new leader until interrupted")
	return func(ctx context.Context, pos []string) error {
		name := pos[0]
		if *observe {
			return c.stream(ctx, func(ctx context.Context, cl *client.Client) error {
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
		return c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
			l, err := session.CurrentLeader(ctx, cl, name)
			if err != nil {
				return err
			}
			return c.printLeader("leader", l)
		})
	}
}

// lockWatch runs "raftlock lock watch NAME": print the lock's state, then
// each change, until interrupted; each line starts with the time. With
// --prefix P (and no NAME) it watches every lock under P instead
// (lockWatchPrefix).
func (c *cli) lockWatch(fs *flag.FlagSet) runFunc {
	prefix := fs.String("prefix", "", "watch every lock whose name starts with `P` (\"\": all of them) instead of one NAME")
	return func(ctx context.Context, pos []string) error {
		byPrefix := false
		fs.Visit(func(f *flag.Flag) { byPrefix = byPrefix || f.Name == "prefix" })
		if byPrefix == (len(pos) == 1) {
			return usagef("lock watch", "give either NAME or --prefix P, not both nor neither")
		}
		if byPrefix {
			return c.lockWatchPrefix(ctx, *prefix)
		}
		return c.stream(ctx, func(ctx context.Context, cl *client.Client) error {
			ch, err := session.Watch(ctx, cl, pos[0])
			if err != nil {
				return err
			}
			for st := range ch {
				if err := c.printWatched(st); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// lockWatchPrefix runs "raftlock lock watch --prefix P": the locks under P
// (a reset line, then one line each), then one line per lock changed, as
// the cluster answers (client.WatchPrefix: nothing missed, nothing twice).
func (c *cli) lockWatchPrefix(ctx context.Context, prefix string) error {
	return c.stream(ctx, func(ctx context.Context, cl *client.Client) error {
		for ch, err := range cl.WatchPrefix(ctx, prefix, 0) {
			if err != nil {
				return err
			}
			if err := c.printPrefixChange(prefix, ch); err != nil {
				return err
			}
		}
		return nil
	})
}

// stream runs a command that prints until interrupted: --timeout does not
// apply (but a cluster that cannot be reached at the start fails it), and
// the interrupt is a normal end.
func (c *cli) stream(ctx context.Context, f func(context.Context, *client.Client) error) error {
	cl, err := c.longClient(ctx)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	err = f(ctx, cl)
	if ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())) {
		return nil
	}
	return err
}
