package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/raftlock/raftlock/cmd/internal/flaghint"
)

// flagGroup is a heading of a command's help and the flags under it, in
// the order they are printed.
type flagGroup struct {
	title string
	flags []string
}

// serveGroups are the groups of the serve flags, as raftlockd --help
// prints them. Every serve flag is in exactly one
// (TestEveryServeFlagIsInOneHelpGroup); a name the build lacks
// (unsafe-fault, only with -tags raftlock_faults) is skipped.
var serveGroups = []flagGroup{
	{"Cluster", []string{"id", "raft-addr", "raft-advertise", "http-addr", "stream-addr", "peers", "join", "join-token", "nonvoter",
		"failover-grace", "raft-heartbeat-timeout", "raft-election-timeout", "raft-leader-lease-timeout"}},
	{"Storage", []string{"data-dir", "log-store", "snapshot-threshold", "snapshot-interval", "snapshot-trailing-logs",
		"restore", "min-token", "restore-hold"}},
	{"TLS and ACL", []string{"tls-cert", "tls-key", "tls-ca", "client-cert-auth", "insecure", "acl", "metrics-open"}},
	{"Limits", []string{"max-sessions", "max-locks", "max-waiters-per-lock", "max-locks-per-session",
		"max-sessions-per-token", "max-locks-per-token", "max-waiters-per-token", "max-prefix-watchers", "max-prefix-watchers-per-token",
		"max-blocking-queries", "max-blocking-queries-per-token",
		"max-answer-bytes-in-flight", "max-answer-bytes-in-flight-per-token",
		"max-conns-per-ip", "http-idle-timeout"}},
	{"Observability", []string{"log-level", "log-json", "metrics-addr", "debug-addr", "debug-allow-remote", "version"}},
	{"Development", []string{"dev", "unsafe-fault"}},
	{"Deprecated (removed in the next release; use the commands above)", []string{"recover", "migrate-log-store"}},
}

// newFlagSet returns the flag set of command name: it prints nothing by
// itself but its errors (through flaghint, to stderr); -h comes back from
// Parse as flag.ErrHelp, for the caller to print the help once.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(flaghint.Writer(stderr))
	fs.Usage = func() {}
	return fs
}

// printFlags prints the flags of fs under the groups' headings (with
// groups nil, all of them under "Flags"), each as --name TYPE, its usage
// on the next line and its default when it is not the zero value.
func printFlags(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	if groups == nil {
		var all []string
		fs.VisitAll(func(f *flag.Flag) { all = append(all, f.Name) })
		groups = []flagGroup{{"Flags", all}}
	}
	for _, g := range groups {
		var b strings.Builder
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				printFlag(&b, f)
			}
		}
		if b.Len() > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", g.title, b.String())
		}
	}
}

// secretDefault are the flags whose default is a secret taken from the
// environment (--join-token: $RAFTLOCK_ACL_TOKEN): the help never prints
// it.
var secretDefault = map[string]bool{"join-token": true}

func printFlag(w io.Writer, f *flag.Flag) {
	typ, usage := flag.UnquoteUsage(f)
	if typ != "" {
		typ = " " + typ
	}
	fmt.Fprintf(w, "  --%s%s\n    \t%s", f.Name, typ, strings.ReplaceAll(usage, "\n", "\n    \t"))
	switch {
	case secretDefault[f.Name], f.DefValue == "", f.DefValue == "false", f.DefValue == "0", f.DefValue == "0s":
	default:
		fmt.Fprintf(w, " (default %s)", f.DefValue)
	}
	fmt.Fprintln(w)
}

// nearest is the name among candidates closest to word (edit distance at
// most 2, and less than half of word's length), or "".
func nearest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD && 2*d < len(word) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// unknownFlagHint is, for a parse error of fs that names a flag it does
// not define, a line suggesting the nearest flag of fs, or naming the
// command that has that flag; "" otherwise.
func unknownFlagHint(err error, fs *flag.FlagSet) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	name = strings.TrimPrefix(name, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if n := nearest(name, names); n != "" {
		return fmt.Sprintf("did you mean --%s?", n)
	}
	for _, c := range commands() {
		if c.name == fs.Name() || c.flags == nil {
			continue
		}
		if c.flags(io.Discard).Lookup(name) != nil {
			return fmt.Sprintf("--%s is a flag of raftlockd %s (raftlockd help %s)", name, c.name, c.name)
		}
	}
	return ""
}
