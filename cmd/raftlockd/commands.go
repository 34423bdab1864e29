package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// command is one of raftlockd's commands: serve (the default) and the
// offline work on a stopped node's data dir (etcd's etcdutl is the
// model), each with only its own flags.
type command struct {
	name, args, summary string
	// details is the help's text between the usage line and the flags.
	details string
	// flags returns the command's flag set (for its help and for the
	// hint naming the command an unknown flag belongs to).
	flags func(stderr io.Writer) *flag.FlagSet
	// groups are the headings of its flags in the help (nil: one list).
	groups []flagGroup
	run    func(args []string, stdout, stderr io.Writer) int
}

// commands are raftlockd's commands, in the order the help lists them.
func commands() []command {
	return []command{
		{name: "serve", args: "[flags]", summary: "run a node (the default: raftlockd [flags] is raftlockd serve [flags]); --dev: a local 3-node cluster",
			flags: func(w io.Writer) *flag.FlagSet { return serveFlags(new(options), w) }, groups: serveGroups, run: runServe},
		{name: "recover", args: "--peers-file FILE --data-dir DIR --min-token N", summary: "after a lost quorum, rewrite a stopped node's data dir for a new configuration",
			details: recoverDetails, flags: func(w io.Writer) *flag.FlagSet { return recoverFlags(new(recoverOptions), w) }, run: runRecoverCommand},
		{name: "migrate-log-store", args: "--data-dir DIR --to wal|boltdb", summary: "move a stopped node's Raft log to the other log store",
			details: migrateDetails, flags: func(w io.Writer) *flag.FlagSet { return migrateFlags(new(migrateOptions), w) }, run: runMigrateCommand},
		{name: "check-data", args: "--data-dir DIR", summary: "check a stopped node's bbolt files as raftlockd does before it starts; exit 0 sound, 1 damaged",
			details: checkDetails, flags: func(w io.Writer) *flag.FlagSet { return checkFlags(new(checkOptions), w) }, run: runCheckCommand},
		{name: "help", args: "[COMMAND]", summary: "this help, or the help of COMMAND", run: runHelp},
	}
}

// findCommand returns the command named name, or nil.
func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return &c
		}
	}
	return nil
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// dispatch runs the command args name, or serve when args begin with a
// flag or are empty.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return runServe(args, stdout, stderr)
	}
	if c := findCommand(args[0]); c != nil {
		return c.run(args[1:], stdout, stderr)
	}
	hint := ""
	if n := nearest(args[0], commandNames()); n != "" {
		hint = fmt.Sprintf("; did you mean %q?", n)
	}
	fmt.Fprintf(stderr, "raftlockd: unknown command %q%s (commands: %s; raftlockd --help)\n", args[0], hint, strings.Join(commandNames(), ", "))
	return 2
}

// runHelp is raftlockd help [COMMAND]: the overview with the serve flags,
// or one command's help, on stdout.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || (len(args) == 1 && (args[0] == "serve" || args[0] == "help")):
		printOverview(stdout)
		return 0
	case len(args) > 1:
		fmt.Fprintf(stderr, "raftlockd help: one command at most, got %q\n", args)
		return 2
	}
	c := findCommand(args[0])
	if c == nil {
		hint := ""
		if n := nearest(args[0], commandNames()); n != "" {
			hint = fmt.Sprintf("; did you mean %q?", n)
		}
		fmt.Fprintf(stderr, "raftlockd help: unknown command %q%s (commands: %s)\n", args[0], hint, strings.Join(commandNames(), ", "))
		return 2
	}
	printCommandHelp(stdout, c)
	return 0
}

// printOverview prints raftlockd --help: a usage line per command, the
// commands, and the serve flags in their groups.
func printOverview(w io.Writer) {
	cs := commands()
	for i, c := range cs {
		lead := "       "
		if i == 0 {
			lead = "usage: "
		}
		name := c.name
		if c.name == "serve" {
			name = "[serve]"
		}
		fmt.Fprintf(w, "%sraftlockd %s %s\n", lead, name, c.args)
	}
	fmt.Fprintf(w, "\nCommands:\n")
	for _, c := range cs {
		fmt.Fprintf(w, "  %-18s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nrecover, migrate-log-store and check-data work offline, on a stopped node's data dir.\n"+
		"'raftlockd help COMMAND' (or 'raftlockd COMMAND -h') prints one command's help. The serve flags:\n")
	printFlags(w, cs[0].flags(io.Discard), serveGroups)
}

// printCommandHelp prints the help of one command: its usage line, what
// it does and its flags.
func printCommandHelp(w io.Writer, c *command) {
	if c.name == "serve" || c.flags == nil {
		printOverview(w)
		return
	}
	fmt.Fprintf(w, "usage: raftlockd %s %s\n\n%s\n", c.name, c.args, c.summary)
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.details))
	}
	printFlags(w, c.flags(io.Discard), c.groups)
}

// parseCommand parses the flags of command name: -h prints its help on
// stdout (exit 0); a bad flag is printed with a hint (exit 2); so is an
// argument that is not a flag. ok reports whether to go on; code is the
// exit status otherwise.
func parseCommand(name string, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printCommandHelp(stdout, findCommand(name))
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "raftlockd %s: %s\n", name, flagErrorHint(err, fs, "raftlockd help "+name))
		return 2, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "raftlockd %s: unexpected arguments %q (it takes flags only: raftlockd help %s)\n", name, fs.Args(), name)
		return 2, false
	}
	return 0, true
}

// flagErrorHint is the line printed after the flag package's error: the
// nearest flag's name, or the command an unknown flag belongs to, and
// where the flags are listed.
func flagErrorHint(err error, fs *flag.FlagSet, help string) string {
	if h := unknownFlagHint(err, fs); h != "" {
		return h + " (" + help + " lists the flags)"
	}
	return help + " lists the flags"
}

// logOptions are the log flags of the offline commands.
type logOptions struct {
	level string
	json  bool
}

func addLogFlags(fs *flag.FlagSet, o *logOptions) {
	fs.StringVar(&o.level, "log-level", "info", "trace, debug, info, warn or error")
	fs.BoolVar(&o.json, "log-json", false, "log JSON lines")
}

// check refuses an unknown --log-level.
func (o logOptions) check() error {
	if hclog.LevelFromString(o.level) == hclog.NoLevel {
		return fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", o.level)
	}
	return nil
}

// logger is the command's logger, on stderr.
func (o logOptions) logger(stderr io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "raftlockd", Level: hclog.LevelFromString(o.level), JSONFormat: o.json, Output: stderr})
}

// deprecated prints the one WARN line of a deprecated spelling, naming
// the new one.
func deprecated(stderr io.Writer, old, spelling string) {
	hclog.New(&hclog.LoggerOptions{Name: "raftlockd", Output: stderr}).
		Warn(fmt.Sprintf("%s is deprecated and goes in the next release: run `%s` instead", old, spelling))
}
