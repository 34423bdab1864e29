package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/api"
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

// timeFormat is how the CLI prints a time: RFC 3339 with milliseconds, in
// local time.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// stamp formats t as the CLI prints times.
func (c *cli) stamp(t time.Time) string { return t.In(c.loc).Format(timeFormat) }

// lockSummary says whether l is held, in its lock-delay or free: "exclusive,
// 1 holder(s)", "lock-delay until T (no holder)" or "free". A lock in its
// lock-delay is never called free: it cannot be taken until T.
func (c *cli) lockSummary(l api.LockState) string {
	if l.Permits > 0 {
		s := fmt.Sprintf("semaphore, %d/%d slots held", len(l.Holders), l.Permits)
		if n := len(l.SlotDelays); n > 0 {
			s += fmt.Sprintf(", %d in lock-delay", n)
		}
		return s
	}
	switch {
	case len(l.Holders) > 0:
		return fmt.Sprintf("%s, %d holder(s)", l.Mode, len(l.Holders))
	case !l.DelayUntil.IsZero():
		return fmt.Sprintf("lock-delay until %s (no holder)", c.stamp(l.DelayUntil))
	default:
		return "free"
	}
}

// holderText describes one holder: `session HANDLE "NAME" holder H token N
// value "V"`; the session is named by its handle, never its id (the server
// never reveals one), and by its name when it has one.
func holderText(l api.LockState, h api.Holder) string {
	s := ""
	if l.Permits > 0 {
		s = fmt.Sprintf("slot %d: ", h.Slot)
	}
	s += "session " + h.SessionHandle
	if h.SessionName != "" {
		s += fmt.Sprintf(" %q", h.SessionName)
	}
	s += fmt.Sprintf(" holder %s token %d", h.Holder, h.Token)
	if h.Value != "" {
		s += fmt.Sprintf(" value %q", h.Value)
	}
	return s
}

func (c *cli) printLock(l api.LockState) error {
	var b strings.Builder
	fmt.Fprintf(&b, "lock %s: %s\n", l.Name, c.lockSummary(l))
	for _, h := range l.Holders {
		fmt.Fprintf(&b, "  %s\n", holderText(l, h))
	}
	for _, d := range l.SlotDelays {
		fmt.Fprintf(&b, "  slot %d: lock-delay until %s\n", d.Slot, c.stamp(d.Until))
	}
	fmt.Fprintf(&b, "waiters: %d\n", l.Waiters)
	if len(l.Holders) > 0 && !l.DelayUntil.IsZero() {
		fmt.Fprintf(&b, "lock-delay until: %s\n", c.stamp(l.DelayUntil))
	}
	return c.printf("%s", b.String())
}

// printWatched prints one state of lock watch: one line starting with the
// time, or with -o json the API's lock state with "at".
func (c *cli) printWatched(l api.LockState) error {
	at := c.stamp(c.now())
	if c.json() {
		return c.printJSON(struct {
			At string `json:"at"`
			api.LockReply
		}{at, api.NewLockReply(l)})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s lock %s: %s", at, l.Name, c.lockSummary(l))
	for _, h := range l.Holders {
		fmt.Fprintf(&b, "; %s", holderText(l, h))
	}
	fmt.Fprintf(&b, "; waiters: %d\n", l.Waiters)
	return c.printf("%s", b.String())
}

// printPrefixChange prints one answer of lock watch --prefix: a reset says
// so first ("reset: N locks under P", the whole state, which replaces what
// came before), then one line per lock as printWatched; with -o json the
// API's answer with "at", one object a line.
func (c *cli) printPrefixChange(prefix string, ch api.LocksChange) error {
	at := c.stamp(c.now())
	if c.json() {
		return c.printJSON(struct {
			At string `json:"at"`
			api.LocksReply
		}{at, api.NewLocksChangeReply(ch)})
	}
	if ch.Reset {
		if err := c.printf("%s reset: %d lock(s) under %q held, waited for or delayed (the whole state; forget earlier lines)\n", at, len(ch.Locks), prefix); err != nil {
			return err
		}
	}
	for _, l := range ch.Locks {
		if err := c.printWatched(l); err != nil {
			return err
		}
	}
	return nil
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
		switch {
		case l.Permits > 0:
			mode = fmt.Sprintf("semaphore %d/%d", len(l.Holders), l.Permits)
		case len(l.Holders) > 0:
			mode = l.Mode.String()
		case !l.DelayUntil.IsZero():
			mode = "lock-delay" // no holder, but not free either
		}
		delay := "-"
		if !l.DelayUntil.IsZero() {
			delay = c.stamp(l.DelayUntil)
		}
		var first time.Time // the first slot delay to end (as stamped)
		for _, d := range l.SlotDelays {
			if first.IsZero() || d.Until.Before(first) {
				first = d.Until
			}
		}
		if !first.IsZero() {
			delay = c.stamp(first)
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
