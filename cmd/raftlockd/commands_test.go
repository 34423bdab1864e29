package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/raftlock/raftlock/cmd/internal/proccluster"
)

// runOut runs raftlockd with args in this process and returns its exit
// status, standard output and standard error.
func runOut(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := runIO(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// raftlockd --help (-h, help, serve -h) prints on stdout, exit 0: a usage
// line per command, then the serve flags under their group headings.
func TestHelpListsTheCommandsAndTheServeFlagsInGroups(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"serve", "-h"}, {"help", "serve"}, {"--dev", "-h"}} {
		code, out, errOut := runOut(args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q; want 0 and nothing", args, code, errOut)
		}
		if !strings.HasPrefix(out, "usage: raftlockd [serve] [flags]\n       raftlockd recover --peers-file FILE") {
			t.Errorf("%q: the help does not begin with the usage lines:\n%s", args, out)
		}
		for _, w := range []string{"\n       raftlockd migrate-log-store --data-dir DIR --to wal|boltdb\n",
			"\n       raftlockd check-data --data-dir DIR\n", "\n  check-data ",
			"\nCluster:\n  --id string\n", "\nStorage:\n  --data-dir string\n", "\nTLS and ACL:\n  --tls-cert string\n",
			"\nLimits:\n  --max-sessions int\n", "\nObservability:\n  --log-level string\n", "\nDevelopment:\n  --dev\n",
			"\nDeprecated (removed in the next release; use the commands above):\n  --recover string\n"} {
			if !strings.Contains(out, w) {
				t.Errorf("%q: the help lacks %q:\n%s", args, w, out)
			}
		}
	}
}

// Every serve flag is under exactly one heading of the help: a new flag
// that is in none would be missing from raftlockd --help.
func TestEveryServeFlagIsInOneHelpGroup(t *testing.T) {
	in := map[string]int{}
	for _, g := range serveGroups {
		for _, f := range g.flags {
			in[f]++
		}
	}
	serveFlags(new(options), io.Discard).VisitAll(func(f *flag.Flag) {
		if in[f.Name] != 1 {
			t.Errorf("--%s is in %d groups of the help, want 1", f.Name, in[f.Name])
		}
	})
}

// The help never prints a secret taken from the environment as a
// default: --join-token's is $RAFTLOCK_ACL_TOKEN.
func TestHelpDoesNotPrintTheJoinTokenFromTheEnvironment(t *testing.T) {
	t.Setenv("RAFTLOCK_ACL_TOKEN", "s3cret-token-value")
	_, out, _ := runOut("--help")
	if strings.Contains(out, "s3cret-token-value") || !strings.Contains(out, "--join-token string") {
		t.Fatalf("the help prints the token, or lacks --join-token:\n%s", out)
	}
}

// Each offline command's help (help NAME, NAME -h, NAME --help) prints on
// stdout, exit 0, its usage line and its own flags only.
func TestOfflineCommandHelpShowsOnlyItsFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		usage string
		flags []string
	}{
		{"recover", "usage: raftlockd recover --peers-file FILE --data-dir DIR --min-token N\n",
			[]string{"--data-dir", "--peers-file", "--min-token", "--restore-hold", "--log-level", "--log-json"}},
		{"migrate-log-store", "usage: raftlockd migrate-log-store --data-dir DIR --to wal|boltdb\n",
			[]string{"--data-dir", "--to", "--log-level", "--log-json"}},
		{"check-data", "usage: raftlockd check-data --data-dir DIR\n", []string{"--data-dir", "--id", "--in-process"}},
	} {
		for _, args := range [][]string{{"help", tc.name}, {tc.name, "-h"}, {tc.name, "--help"}} {
			code, out, errOut := runOut(args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, tc.usage) {
				t.Errorf("%q: exit %d, stderr %q, stdout:\n%s", args, code, errOut, out)
				continue
			}
			var listed []string
			for _, l := range strings.Split(out, "\n") {
				if f, ok := strings.CutPrefix(l, "  --"); ok {
					listed = append(listed, "--"+strings.Fields(f)[0])
				}
			}
			if strings.Join(sorted(listed), " ") != strings.Join(sorted(tc.flags), " ") {
				t.Errorf("%q lists the flags %q, want %q", args, listed, tc.flags)
			}
		}
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// An unknown command, an unknown flag and a flag of another command exit 2
// with one hint: the nearest name, or the command the flag belongs to.
func TestUnknownCommandsAndFlagsGetAHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"recovr"}, `raftlockd: unknown command "recovr"; did you mean "recover"?`},
		{[]string{"help", "chek-data"}, `unknown command "chek-data"; did you mean "check-data"?`},
		{[]string{"--peer", "n1=127.0.0.1:1"}, "raftlockd: did you mean --peers? (raftlockd --help lists the flags)"},
		{[]string{"--peers-file", "p.json"}, "--peers-file is a flag of raftlockd recover (raftlockd help recover)"},
		{[]string{"recover", "--tls-cert", "c.pem"}, "raftlockd recover: --tls-cert is a flag of raftlockd serve"},
		{[]string{"migrate-log-store", "--data-dri", "d"}, "raftlockd migrate-log-store: did you mean --data-dir?"},
		{[]string{"check-data", "--data-dir", "d", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"recover", "--restore-hold", "soon"}, "not a duration: write it like 5s"},
	} {
		code, out, errOut := runOut(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// raftlockd recover and migrate-log-store refuse missing and wrong flags
// before touching anything (exit 2, naming the flag).
func TestOfflineCommandsRefuseBadFlags(t *testing.T) {
	dir := t.TempDir()
	peers := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(peers, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"recover", "--data-dir", dir, "--min-token", "7"}, "needs --peers-file"},
		{[]string{"recover", "--peers-file", peers, "--min-token", "7"}, "needs --data-dir"},
		{[]string{"recover", "--peers-file", peers, "--data-dir", dir}, "needs --min-token N: every token granted afterwards is above N"},
		{[]string{"recover", "--peers-file", peers, "--data-dir", dir, "--min-token", "-1"}, "not a token"},
		{[]string{"recover", "--peers-file", peers, "--data-dir", dir, "--min-token", "18446744073709551615"}, "above 4611686018427387904"},
		{[]string{"recover", "--peers-file", peers, "--data-dir", dir, "--min-token", "7", "--restore-hold", "7m"}, "--restore-hold 7m0s out of range"},
		{[]string{"recover", "--peers-file", peers, "--data-dir", dir, "--min-token", "7", "--log-level", "loud"}, "--log-level"},
		{[]string{"recover", "--peers-file", peers, "--data-dir", dir, "--min-token", "7"}, "raftlockd recover: peers file"},
		{[]string{"migrate-log-store", "--data-dir", dir}, `--to "": want wal or boltdb`},
		{[]string{"migrate-log-store", "--data-dir", dir, "--to", "sqlite"}, `--to "sqlite": want wal or boltdb`},
		{[]string{"migrate-log-store", "--to", "wal"}, "needs --data-dir"},
		{[]string{"check-data"}, "needs --data-dir"},
		{[]string{"check-data", "--data-dir", filepath.Join(dir, "none")}, "is not a directory"},
		{[]string{"check-data", "--data-dir", dir}, "holds no Raft state"},
	} {
		code, _, errOut := runOut(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the data dir was touched: %v", entries)
	}
}

// The deprecated spellings still work for one release, each printing one
// WARN line that names the new one: --recover, --migrate-log-store and
// the environment variable RAFTLOCKD_CHECK_DATA_DIR.
func TestDeprecatedSpellingsWarnOnceNamingTheNewOne(t *testing.T) {
	dir := t.TempDir()
	peers := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(peers, []byte(`[{"id": "n1", "address": "127.0.0.1:7101"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		code     int
		new, out string
	}{
		// An empty data dir: the recovery and the move fail (exit 1),
		// after the warning, as they did before.
		{[]string{"--recover", peers, "--data-dir", empty, "--min-token", "7"}, 1,
			"`raftlockd recover --peers-file FILE --data-dir DIR --min-token N`", "raftlockd --recover: "},
		{[]string{"--data-dir", empty, "--migrate-log-store", "wal"}, 1,
			"`raftlockd migrate-log-store --data-dir DIR --to STORE`", "raftlockd --migrate-log-store: migrate the log store: " + empty + " holds no Raft state"},
		// Refused flags warn too, and are refused as before.
		{[]string{"--recover", peers, "--min-token", "7"}, 2, "`raftlockd recover --peers-file", "need --data-dir"},
	} {
		code, _, errOut := runOut(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.out) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.out)
		}
		if n := strings.Count(errOut, "[WARN]"); n != 1 || !strings.Contains(errOut, "is deprecated and goes in the next release: run "+tc.new) {
			t.Errorf("%q: %d WARN lines, want one naming %s:\n%s", tc.args, n, tc.new, errOut)
		}
	}
	// The environment variable: the in-process check of an empty dir
	// (nothing to check: exit 0).
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string {
		if k == checkEnv {
			return empty
		}
		return ""
	}
	code := mainIO(getenv, []string{"--dev"}, &stdout, &stderr)
	if code != 0 || strings.Count(stderr.String(), "[WARN]") != 1 ||
		!strings.Contains(stderr.String(), "RAFTLOCKD_CHECK_DATA_DIR is deprecated and goes in the next release: run `raftlockd check-data --data-dir DIR` instead") {
		t.Errorf("RAFTLOCKD_CHECK_DATA_DIR: exit %d, stderr %q", code, stderr.String())
	}
	// The new spellings print no warning.
	code, _, errOut := runOut("recover", "--peers-file", peers, "--data-dir", empty, "--min-token", "7")
	if code != 1 || strings.Contains(errOut, "WARN") || !strings.Contains(errOut, "raftlockd recover: ") {
		t.Errorf("raftlockd recover: exit %d, stderr %q", code, errOut)
	}
}

// raftlockd check-data on a stopped node's data dir prints the verdict on
// stdout: sound (exit 0), damaged naming the file and the repair (exit 1:
// a page bbolt reads as garbage, checked in the child process, and a
// truncated file); and it refuses a data dir a running process holds
// (exit 2), rather than taking the lock's timeout for damage.
func TestCheckDataPrintsTheVerdictOfAStoppedDataDir(t *testing.T) {
	bin := proccluster.BuildDaemon(t)
	check := func(dir string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "check-data", "--id", "n3", "--data-dir", dir)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	sound := func(t *testing.T) string {
		dir := t.TempDir()
		db, err := bbolt.Open(filepath.Join(dir, "raft.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("conf"))
			if err != nil {
				return err
			}
			return b.Put([]byte("CurrentTerm"), []byte{0, 0, 0, 0, 0, 0, 0, 1})
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("sound", func(t *testing.T) {
		dir := sound(t)
		code, out, errOut := check(dir)
		if code != 0 || !strings.Contains(out, dir+": sound: "+filepath.Join(dir, "raft.db")+" pass bbolt's checks") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("garbage pages", func(t *testing.T) {
		dir := sound(t)
		f, err := os.OpenFile(filepath.Join(dir, "raft.db"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		// Every page but the two meta pages: the freelist, the branches
		// and leaves the meta pages point to.
		ps := int64(os.Getpagesize())
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(st.Size()-2*ps)), 2*ps); err != nil {
			t.Fatal(err)
		}
		f.Close()
		code, out, errOut := check(dir)
		if code != 1 || !strings.HasPrefix(out, "raftlockd check-data: data dir damaged: "+filepath.Join(dir, "raft.db")+": ") ||
			!strings.Contains(out, "raftlock members remove n3") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		t.Logf("verdict: %s", out)
	})
	t.Run("truncated", func(t *testing.T) {
		dir := sound(t)
		if err := os.Truncate(filepath.Join(dir, "raft.db"), 2*int64(os.Getpagesize())); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := check(dir)
		if code != 1 || !strings.Contains(out, "data dir damaged: ") || !strings.Contains(out, "truncated") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("in use", func(t *testing.T) {
		dir := sound(t)
		db, err := bbolt.Open(filepath.Join(dir, "raft.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		code, out, errOut := check(dir)
		if code != 2 || out != "" || !strings.Contains(errOut, "is in use (a running node holds it): stop the node first") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// serve is the default command: raftlockd serve FLAGS is raftlockd FLAGS,
// refusals included.
func TestServeIsTheDefaultCommand(t *testing.T) {
	for _, args := range [][]string{{"--id", "n1"}, {"--dev", "extra"}, {"--log-level", "loud", "--dev"}} {
		code, out, errOut := runOut(args...)
		scode, sout, serrOut := runOut(append([]string{"serve"}, args...)...)
		if code != 2 || scode != code || sout != out || serrOut != errOut {
			t.Errorf("%q: exit %d, %q, %q; with serve: %d, %q, %q", args, code, out, errOut, scode, sout, serrOut)
		}
	}
}
