package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/session/api"

	"github.com/raftlock/raftlock/transport"
)

func (c *cli) printf(format string, args ...any) error {
	if _, err := fmt.Fprintf(c.stdout, format, args...); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printJSON prints v as the API's JSON, one value per line.
func (c *cli) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return c.printf("%s\n", b)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func (c *cli) printCluster(info transport.ClusterInfo) error {
	var b strings.Builder
	fmt.Fprintf(&b, "leader: %s\nterm: %d\ncommit index: %d\nmembers:\n", orNone(info.Leader), info.Term, info.CommitIndex)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tRAFT\tHTTP\tROLE")
	for _, m := range info.Members {
		role := "non-voter"
		if m.Voter {
			role = "voter"
		}
		if m.ID == info.Leader {
			role += ", leader"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, orNone(m.HTTPAddr), role)
	}
	_ = tw.Flush()
	return c.printf("%s", b.String())
}

func (c *cli) printLock(l api.LockState) error {
	var b strings.Builder
	if len(l.Holders) == 0 {
		fmt.Fprintf(&b, "lock %s: free\n", l.Name)
	} else {
		fmt.Fprintf(&b, "lock %s: %s, %d holder(s)\n", l.Name, l.Mode, len(l.Holders))
		for _, h := range l.Holders {
			fmt.Fprintf(&b, "  session %s holder %s token %d", h.Session, h.Holder, h.Token)
			if h.Value != "" {
				fmt.Fprintf(&b, " value %q", h.Value)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "waiters: %d\n", l.Waiters)
	if !l.DelayUntil.IsZero() {
		fmt.Fprintf(&b, "lock-delay until: %s\n", l.DelayUntil.UTC().Format(time.RFC3339Nano))
	}
	return c.printf("%s", b.String())
}

func (c *cli) printLocks(ls []api.LockState) error {
	if len(ls) == 0 {
		return c.printf("no locks\n")
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tHOLDERS\tWAITERS\tDELAY UNTIL")
	for _, l := range ls {
		mode := "free"
		if len(l.Holders) > 0 {
			mode = l.Mode.String()
		}
		delay := "-"
		if !l.DelayUntil.IsZero() {
			delay = l.DelayUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", l.Name, mode, len(l.Holders), l.Waiters, delay)
	}
	_ = tw.Flush()
	return c.printf("%s", b.String())
}

func (c *cli) printCheck(chk api.SequencerCheck) error {
	if chk.Valid {
		return c.printf("valid (current token %d)\n", chk.CurrentToken)
	}
	if chk.CurrentToken == 0 {
		return c.printf("not valid (the lock is not held)\n")
	}
	return c.printf("not valid (current token %d)\n", chk.CurrentToken)
}

func (c *cli) printSession(info api.Info) error {
	locks := "(none)"
	if len(info.Locks) > 0 {
		locks = strings.Join(info.Locks, ", ")
	}
	return c.printf("id: %s\nname: %s\nttl: %s\nlock-delay: %s\nlocks: %s\n",
		info.ID, orNone(info.Name), info.TTL, info.LockDelay, locks)
}
