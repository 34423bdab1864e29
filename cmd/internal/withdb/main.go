// Command withdb runs a command with a PostgreSQL and a MariaDB server of
// its own (internal/dbtest: temporary directories, loopback ports), for
// the SQL fence tests of the clients not written in Go:
//
//	go run ./cmd/internal/withdb -- python3 -m pytest tests/test_sqlfence.py
//
// The command's environment has, for PostgreSQL, RAFTLOCK_TEST_PG_DSN (a
// libpq URL) and RAFTLOCK_TEST_PG_JDBC (a JDBC URL), and for MariaDB
// RAFTLOCK_TEST_MYSQL_DSN (mysql://root@127.0.0.1:PORT/test) and
// RAFTLOCK_TEST_MYSQL_JDBC. A server that is not installed is left out
// (its variables unset, so the tests skip) unless RAFTLOCK_REQUIRE_POSTGRES=1
// or RAFTLOCK_REQUIRE_MARIADB=1, when withdb fails. The servers are
// stopped and their directories removed when the command ends; withdb
// exits with the command's exit code.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/raftlock/raftlock/internal/dbtest"
	"github.com/raftlock/raftlock/internal/freeport"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withdb [--] COMMAND [ARG...]")
		os.Exit(2)
	}
	os.Exit(run(args))
}

// run starts the servers, runs the command and stops the servers; it
// returns the exit code.
func run(args []string) (code int) {
	tb := &tb{}
	defer tb.cleanup()
	env := os.Environ()
	if p, ok := start(tb, "postgres", func() *dbtest.Postgres { return dbtest.StartPostgres(tb, tb.reserve) }); ok {
		env = append(env,
			"RAFTLOCK_TEST_PG_DSN="+p.DSN,
			fmt.Sprintf("RAFTLOCK_TEST_PG_JDBC=jdbc:postgresql://127.0.0.1:%d/postgres?user=postgres&sslmode=disable&connectTimeout=5", p.Port))
	} else if tb.failed {
		return 1
	}
	if m, ok := start(tb, "mariadb", func() *dbtest.MariaDB { return dbtest.StartMariaDB(tb, tb.reserve) }); ok {
		env = append(env,
			fmt.Sprintf("RAFTLOCK_TEST_MYSQL_DSN=mysql://root@127.0.0.1:%d/test", m.Port),
			fmt.Sprintf("RAFTLOCK_TEST_MYSQL_JDBC=jdbc:mariadb://127.0.0.1:%d/test?user=root&connectTimeout=5000", m.Port))
	} else if tb.failed {
		return 1
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "withdb: %v\n", err)
		return 1
	}
	// Pass an interrupt on to the command, and stop the servers after it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	signal.Stop(sig)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() < 0 {
			return 1
		}
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "withdb: %v\n", err)
		return 1
	}
	return 0
}

// start runs a dbtest starter, turning its Skipf and Fatalf (which stop
// the starter by panicking with errStop) into ok = false.
func start[T any](tb *tb, name string, f func() T) (v T, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != errStop {
				panic(r)
			}
			ok = false
		}
	}()
	return f(), true
}

// errStop ends a starter at its Skipf or Fatalf, as testing's Goexit would.
var errStop = errors.New("withdb: stop")

// tb is the part of testing.TB that internal/dbtest uses, for a program:
// cleanups run when withdb ends, Skipf leaves a server out, Fatalf fails.
type tb struct {
	cleanups []func()
	failed   bool
}

func (t *tb) Helper() {}

func (t *tb) TempDir() string {
	d, err := os.MkdirTemp("", "raftlock-withdb-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (t *tb) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

func (t *tb) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "withdb: "+format+"\n", args...)
}

func (t *tb) Skipf(format string, args ...any) {
	t.Logf("skipped: "+format, args...)
	panic(errStop)
}

func (t *tb) Fatalf(format string, args ...any) {
	t.Logf(format, args...)
	t.failed = true
	panic(errStop)
}

// cleanup runs the cleanups, last first.
func (t *tb) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// reserve reserves a loopback port for the run.
func (t *tb) reserve() int {
	r, err := freeport.Reserve("127.0.0.1")
	if err != nil {
		t.Fatalf("reserve a port: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r.Port
}
