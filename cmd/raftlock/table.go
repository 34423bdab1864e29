package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
)

// The command table. Every command of raftlock is one entry of commands:
// its name (one word, or a group and a subcommand: "lock get"), its usage
// line, a one-line summary, its long help, its flags and whether it prints
// a result (-o). Dispatch, the overview ("raftlock help"), a group's help
// ("raftlock lock --help") and a command's help ("raftlock help exec",
// "raftlock exec -h") are all built from it, so that a new command is one
// entry and the function that runs it.
//
// It is built on the standard flag package, not on cobra and pflag: they
// would add two modules (and their conventions for help text and errors)
// for what this table and its ~200 lines do. What the flag package lacks
// is added here: flags before or after the positional arguments (parse),
// the global flags in every command's flag set (cli.globalFlags), and the
// help, printed once.
type command struct {
	// name is the command as typed: "status", "lock get".
	name string
	// usage is what follows "raftlock NAME" on its usage line.
	usage string
	// summary is its line in the overview.
	summary string
	// help is its long help (may be empty).
	help string
	// output: the command prints a result, as text or JSON: it takes
	// -o/--output text|json (env RAFTLOCK_OUTPUT) and the deprecated --json.
	// Every command but exec, help and version does.
	output bool
	// nargs are the least and the most positional arguments (-1: any).
	nargs [2]int
	// setup defines the command's own flags on fs and returns the function
	// that runs it with the positional arguments.
	setup func(c *cli, fs *flag.FlagSet) runFunc
	// split, if set, parses the arguments instead of parse (exec's NAME --
	// CMD [ARGS...]).
	split func(fs *flag.FlagSet, args []string) ([]string, error)
}

// runFunc runs a command with its positional arguments.
type runFunc = func(ctx context.Context, args []string) error

// commands is the table, in the overview's order; it is filled in by init
// because help and its text refer to the table.
var commands []*command

func init() {
	commands = []*command{
		{name: "status", summary: "the cluster's leader, term, commit index and members", output: true,
			help: `Asks the leader, through any node, for the cluster's members, then each member
for its own view: its state (leader, follower, candidate or unreachable), its
health (GET /v1/health), how long ago it heard from the leader, the log index
it applied and its lag behind the leader. Without a leader to ask, it reports
what each --addr says and exits 1.`,
			setup: (*cli).status},
		{name: "lock get", usage: "NAME", summary: "the state of one lock: holders, waiters, lock-delay", output: true,
			nargs: [2]int{1, 1}, setup: (*cli).lockGet},
		{name: "lock list", usage: "[PREFIX]", summary: "the locks whose names start with PREFIX", output: true,
			help:  "Lists the locks held, waited for or in a lock-delay (all of them without PREFIX).",
			nargs: [2]int{0, 1}, setup: (*cli).lockList},
		{name: "lock watch", usage: "NAME | --prefix P", summary: "a lock's (or a prefix's) state, then every change", output: true,
			help: `Prints the lock's state, then each change as the leader applies it (blocking
queries: nothing polls), one line each, starting with the local time (RFC 3339,
milliseconds). A lock in its lock-delay has no holder and cannot be taken until
the time printed: "lock-delay until T (no holder)". -o json prints the API's
lock state with "at", the time, one object a line. It rides out failovers;
--timeout does not apply; an interrupt ends it (exit 0).

With --prefix P instead of NAME it watches every lock whose name starts with P
("" for all; needs read on P): first a line "reset: N lock(s) under P" and the
locks held, waited for or delayed, then a line per lock each time it changes
("free" once it is released), none missed, none twice, across failovers. A
reset line again (after a restore, or a watcher too far behind) means the
lines after it are the whole state. -o json prints each answer of the API
(GET /v1/locks?prefix&index) with "at", one object a line.`,
			nargs: [2]int{0, 1}, setup: (*cli).lockWatch},
		{name: "lock revoke", usage: "NAME [--holder H] [--session-handle HANDLE] --reason R",
			summary: "revoke one grant of a lock (admin): its holder is told first", output: true,
			help: lockRevokeHelp, nargs: [2]int{1, 1}, setup: (*cli).lockRevoke},
		{name: "lock request-release", usage: "NAME --session ID [--holder H]",
			summary: "ask a lock's holders to release it; they choose", output: true,
			help: `Asks the holders of the lock NAME to release it, on behalf of the session ID
(write on the lock): each holder's grant shows release_requested (who, when)
until it ends, and its client sees it at its next keepalive (Go:
Lock.ReleaseRequested(); exec prints a release_requested line). The holder
chooses whether and when to release.`,
			nargs: [2]int{1, 1}, setup: (*cli).lockRequestRelease},
		{name: "sequencer check", usage: "SEQUENCER", summary: "is the sequencer still current? (exit 1, stale_sequencer, if not)", output: true,
			help: `Asks the cluster whether SEQUENCER (from acquire, or RAFTLOCK_SEQUENCER under
exec) is still current, and exits 1 with stale_sequencer if it is not, so that
a script can write: raftlock sequencer check "$SEQ" && write.`,
			nargs: [2]int{1, 1}, setup: (*cli).sequencerCheck},
		{name: "session open", usage: "[--ttl 15s] [--lock-delay 10s] [--name N]", summary: "open a session; prints its id", output: true,
			help: `Opens a session. Keep it alive with "session keepalive" every ttl/3; when its
lease runs out the cluster expires it, and its locks stay unavailable for its
lock-delay.`,
			setup: (*cli).sessionOpen},
		{name: "session keepalive", usage: "ID", summary: "extend a session's lease; prints its TTL", output: true,
			nargs: [2]int{1, 1}, setup: (*cli).sessionKeepAlive},
		{name: "session get", usage: "ID", summary: "describe a session: name, TTL, lock-delay, locks", output: true,
			nargs: [2]int{1, 1}, setup: (*cli).sessionGet},
		{name: "session close", usage: "ID | HANDLE --reason R", summary: "close a session: by ID its locks are released at once", output: true,
			help: `Closes a session. By its ID (32 hex digits): its locks are released at once,
without lock-delay. By its HANDLE (16 hex digits, as "session list" shows it;
admin; --reason required): an operator's close, as deleting its token would
be: each of its locks stays unavailable for the session's ttl + lock-delay, and
its client learns at its next request that the session is gone.`,
			nargs: [2]int{1, 1}, setup: (*cli).sessionClose},
		{name: "session list", usage: "[--name N] [--handle HANDLE]", summary: "the open sessions by handle and name (admin)", output: true,
			help: `Lists the open sessions (admin): handle, name, ttl, lock-delay, when opened and
the locks each holds or waits for; never a session id. At most 1000.`,
			setup: (*cli).sessionList},
		{name: "acquire", usage: "--session ID [--holder H] [--shared] [--wait 0s] [--value V] NAME",
			summary: "take a lock; prints token, sequencer and holder", output: true,
			help: `Takes the lock NAME for the session: tries once, or waits in the lock's queue
up to --wait. Prints the grant's token and sequencer and the holder id (a
random one unless --holder) that release needs. A busy lock is lock_busy, with
the cluster's word on who holds it or until when it is in its lock-delay.`,
			nargs: [2]int{1, 1}, setup: (*cli).acquire},
		{name: "release", usage: "--session ID --holder H NAME", summary: "give a lock up", output: true,
			nargs: [2]int{1, 1}, setup: (*cli).release},
		{name: "exec", usage: "[--shared] [--wait D] [--ttl 15s] [--lock-delay 10s] [--kill-grace 3s] [--value V] NAME -- CMD [ARGS...]",
			summary: "run CMD while holding the lock NAME", help: execHelp,
			setup: (*cli).execCmd, split: splitExecArgs},
		{name: "elect", usage: "[--ttl 15s] [--lock-delay 10s] [--wait D] NAME VALUE",
			summary: "campaign to lead NAME with VALUE; holds until interrupted", output: true,
			help: `Campaigns to lead the election NAME with VALUE (e.g. your address): waits for
it (as long as it takes, or up to --wait), prints "elected: ..." and holds the
leadership until interrupted, then resigns, so the next campaigner takes over at
once. Exits 1 (lock_lost) if the leadership is lost.`,
			nargs: [2]int{2, 2}, setup: (*cli).elect},
		{name: "leader", usage: "[--observe] NAME", summary: "the current leader of NAME (--observe: each new leader)", output: true,
			help: `Prints the leader of the election NAME: its value, token and sequencer (exit 1,
no_election_leader, if there is none). With --observe, prints every leader in
grant order until interrupted.`,
			nargs: [2]int{1, 1}, setup: (*cli).leader},
		{name: "fence-proxy", usage: "--lock NAME --listen ADDR --upstream URL --state FILE",
			summary: "fence an HTTP backend: forward only requests with a current sequencer", help: fenceProxyHelp,
			setup: (*cli).fenceProxy},
		{name: "tls init", usage: "DIR --node ID=HOST [--node ...] [--client NAME ...]",
			summary: "write a CA, node and client certificates for a TLS cluster", help: tlsInitHelp,
			nargs: [2]int{1, 1}, setup: (*cli).tlsInit},
		{name: "acl bootstrap", summary: "create the management token, once per cluster (raftlockd --acl)", output: true,
			help: aclBootstrapHelp, setup: (*cli).aclBootstrap},
		{name: "acl token create", usage: "--rule RULE [--rule ...] [--name NAME]",
			summary: "create a token with rules read:PREFIX, write:PREFIX or admin; prints its secret once", output: true,
			help: aclTokenCreateHelp, setup: (*cli).aclTokenCreate},
		{name: "acl token list", summary: "the tokens: id, name and rules (never secrets)", output: true,
			setup: (*cli).aclTokenList},
		{name: "acl token delete", usage: "ID", summary: "delete a token and close its sessions", output: true,
			nargs: [2]int{1, 1}, setup: (*cli).aclTokenDelete},
		{name: "snapshot save", usage: "FILE", summary: "save a backup of the cluster's state to FILE (admin)", output: true,
			help: snapshotSaveHelp, nargs: [2]int{1, 1}, setup: (*cli).snapshotSave},
		{name: "snapshot inspect", usage: "FILE|DATA-DIR", summary: "check a backup file and print its index, term, sessions, locks, checksum", output: true,
			help: snapshotInspectHelp, nargs: [2]int{1, 1}, setup: (*cli).snapshotInspect},
		{name: "snapshot restore", usage: "FILE [--min-token N]", summary: "replace the cluster's state with a backup's; tokens keep rising (admin)", output: true,
			help: snapshotRestoreHelp, nargs: [2]int{1, 1}, setup: (*cli).snapshotRestore},
		{name: "members list", summary: "the cluster's members: id, Raft and HTTP addresses, voter or not (admin)", output: true,
			setup: (*cli).membersList},
		{name: "members add", usage: "--raft-addr HOST:PORT --http-addr HOST:PORT [--nonvoter] ID",
			summary: "add a node to the cluster (admin)", output: true, help: membersAddHelp,
			nargs: [2]int{1, 1}, setup: (*cli).membersAdd},
		{name: "members remove", usage: "[--force] ID", summary: "remove a member from the cluster (admin)", output: true,
			help: membersRemoveHelp, nargs: [2]int{1, 1}, setup: (*cli).membersRemove},
		{name: "leader-transfer", usage: "[ID]", summary: "hand leadership to voter ID, or to the most up-to-date one (admin)",
			output: true, help: leaderTransferHelp, nargs: [2]int{0, 1}, setup: (*cli).leaderTransfer},
		{name: "version", summary: "raftlock's version, VCS commit and Go version (also: --version)",
			setup: (*cli).version},
		{name: "help", usage: "[COMMAND]", summary: "this overview, or the help of COMMAND",
			nargs: [2]int{0, 3}, setup: (*cli).help},
	}
}

// lookup finds the command that args (from the command's name on) name,
// and returns it with its own arguments. For "GROUP -h|--help|help" it
// returns no command and the group.
func lookup(args []string) (cmd *command, group string, rest []string, err error) {
	name := args[0]
	if !isGroup(name) {
		if cmd = find(name); cmd == nil {
			return nil, "", nil, usagef("", "unknown command %q%s", name, didYouMean(name, topLevel()))
		}
		return cmd, "", args[1:], nil
	}
	if len(args) == 1 {
		return nil, "", nil, usagef(name, "missing command: one of %s", strings.Join(groupCommands(name), ", "))
	}
	switch sub := args[1]; sub {
	case "-h", "-help", "--help", "help":
		return nil, name, nil, nil
	default:
		if cmd = find(name + " " + sub); cmd != nil {
			return cmd, "", args[2:], nil
		}
		// A group within the group: "acl token create".
		if isGroup(name + " " + sub) {
			return lookup(append([]string{name + " " + sub}, args[2:]...))
		}
		return nil, "", nil, usagef(name, "unknown command %q%s", sub, didYouMean(sub, groupCommands(name)))
	}
}

// topLevel returns the first words of the commands: the top-level
// commands and groups ("status", "lock", ...), each once.
func topLevel() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range commands {
		w, _, _ := strings.Cut(c.name, " ")
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// didYouMean is `; did you mean "X"?` for the candidate nearest to word
// (edit distance at most 2, and less than half of word's length), or "".
func didYouMean(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD && 2*d < len(word) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the Levenshtein distance between a and b, with a swap of
// two neighbours counting 1 (the commonest typo).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// find returns the command named name, nil if none.
func find(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// isGroup reports whether name is a group of commands ("lock").
func isGroup(name string) bool { return len(groupCommands(name)) > 0 }

// groupCommands returns the subcommands of group ("get", "list", ...).
func groupCommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			subs = append(subs, sub)
		}
	}
	return subs
}

// overview is the help of raftlock: the commands with their summaries,
// the global flags, the exit statuses.
func overview() string {
	var b strings.Builder
	b.WriteString("usage: raftlock [global flags] COMMAND [ARGS]\n\n" +
		"raftlock is the command-line client of a raftlock cluster.\n\nCommands:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	b.WriteString(globalHelp + "\n" + exitHelp +
		"\nRun 'raftlock help COMMAND' (or 'raftlock COMMAND --help') for its flags and details.\n")
	return b.String()
}

const globalHelp = `
Global flags (before or after the command):
  --addr host:port[,host:port...]  nodes to talk to (env RAFTLOCK_ADDR; default 127.0.0.1:7001)
                                   (https://host:port for a node that serves HTTPS)
  --timeout D                      give up after D (env RAFTLOCK_TIMEOUT; default 30s; 0s:
                                   never, not even when no node can be reached); a waiting
                                   acquire gets its --wait on top. When no node at all can
                                   be connected to, a command fails in about 1s: unreachable
  --ca FILE                        the CA certificate to verify https:// nodes against (env
                                   RAFTLOCK_CACERT; default the system's)
  --cert FILE, --key FILE          the client certificate and key to present, for a cluster
                                   run with --client-cert-auth (env RAFTLOCK_CERT, RAFTLOCK_KEY)
  --token SECRET                   the ACL token to call with, for a cluster run with --acl
                                   (env RAFTLOCK_ACL_TOKEN, which ps does not show)
  -o, --output text|json           print results as text or as the API's JSON (env
                                   RAFTLOCK_OUTPUT; default text)
  --json                           same as -o json (deprecated)
  --version                        print the version and exit
  -h, --help                       this overview; after a command, its help
`

const exitHelp = `Exit status:
  0      success
  1      an error, printed as one line "raftlock: CODE: message" on stderr
  2      a usage error (unknown command, bad flag or value), printed as
         "raftlock: usage: message" and a hint on the help to read
  exec only:
  N      CMD's own status (128+N if signal N ended it)
  124    the lock was lost while CMD ran (lock_lost; CMD was stopped)
  125    the lock could not be taken (lock_busy, wait_timeout, unreachable, ...)
  126    CMD could not be started (not_executable)
  127    CMD was not found (command_not_found)
`

// groupHelp is the help of a group of commands.
func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: raftlock %s COMMAND [ARGS]\n\nCommands:\n", group)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nRun 'raftlock help %s COMMAND' for its flags and details.\n", group)
	return b.String()
}

// helpText is a command's help: usage, summary, long help, its own flags
// and the global ones it takes.
func (cmd *command) helpText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: raftlock %s\n\n%s.\n", strings.TrimSpace(cmd.name+" "+cmd.usage), upperFirst(cmd.summary))
	if cmd.help != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(cmd.help, "\n"))
	}
	fs := newFlagSet(cmd.name)
	cmd.setup(newCLI(nil, nil), fs)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if globalFlag[f.Name] {
			return
		}
		if n++; n == 1 {
			fmt.Fprintf(tw, "\nFlags:\n")
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg == "duration" {
			arg = "D"
		}
		if arg != "" {
			arg = " " + arg
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
			usage += " (default " + def + ")"
		}
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-" // a one-letter flag, as in exec -n
		}
		fmt.Fprintf(tw, "  %s%s%s\t%s\n", dashes, f.Name, arg, usage)
	})
	_ = tw.Flush()
	global := "--addr, --timeout, --ca, --cert, --key"
	if cmd.output {
		global += ", -o/--output"
	}
	fmt.Fprintf(&b, "\nGlobal flags: %s (see 'raftlock help').\n", global)
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// help runs "raftlock help [COMMAND]".
func (c *cli) help(_ *flag.FlagSet) runFunc {
	return func(_ context.Context, args []string) error {
		if len(args) == 0 {
			return c.printf("%s", overview())
		}
		cmd, group, _, err := lookup(append(args, "--help"))
		switch {
		case err != nil:
			return err
		case cmd == nil:
			return c.printf("%s", groupHelp(group))
		}
		return c.printf("%s", cmd.helpText())
	}
}
