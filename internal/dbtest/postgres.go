// Package dbtest starts real database servers for tests: a PostgreSQL
// server of its own in a temporary directory, on a loopback port, torn
// down when the test ends. Nothing is shared with a system database.
package dbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Postgres is a running PostgreSQL server.
type Postgres struct {
	// DSN connects to its database "postgres" as the superuser
	// "postgres" over TCP, without a password (trust on loopback).
	DSN  string
	Port int
	dir  string
	bin  string
	user *user.User
}

// PostgresBinDir returns the directory of the newest installed
// PostgreSQL server (Debian: /usr/lib/postgresql/N/bin), or "" if there is
// none.
func PostgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartPostgres starts a PostgreSQL server for the test on 127.0.0.1:port
// (port from reserve, which returns a free port and keeps it reserved for
// the test) and stops it when the test ends. The test is skipped when no
// PostgreSQL server is installed, unless RAFTLOCK_REQUIRE_POSTGRES=1 (CI),
// when it fails. As root, the server runs as the system user "postgres"
// (PostgreSQL refuses to run as root).
func StartPostgres(t TB, reserve func() int) *Postgres {
	t.Helper()
	bin := PostgresBinDir()
	if bin == "" {
		if os.Getenv("RAFTLOCK_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("no PostgreSQL server installed (apt-get install postgresql), and RAFTLOCK_REQUIRE_POSTGRES=1")
		}
		t.Skipf("no PostgreSQL server installed (apt-get install postgresql)")
	}
	p := &Postgres{bin: bin, Port: reserve()}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and there is no user postgres to run PostgreSQL as: %v", err)
		}
		p.user = u
	}
	// A directory the server's user can reach: t.TempDir is under a 0700
	// directory of root's.
	dir, err := os.MkdirTemp("", "raftlock-pg-")
	if err != nil {
		t.Fatalf("postgres dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p.dir = dir
	if err := p.chown(dir); err != nil {
		t.Fatalf("postgres dir: %v", err)
	}
	data := filepath.Join(dir, "data")
	if out, err := p.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s -c fsync=on -c max_connections=200", p.Port, dir)
	if out, err := p.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() {
		if out, err := p.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			t.Logf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	p.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", p.Port)
	return p
}

// Stop stops the server at once (as a crash would), for tests of a
// database that is down; Start brings it back.
func (p *Postgres) Stop() error {
	out, err := p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// Start starts the server again after Stop.
func (p *Postgres) Start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s", p.Port, p.dir)
	out, err := p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

// Psql runs SQL through psql against the server and returns its output.
func (p *Postgres) Psql(sql string) (string, error) {
	out, err := p.run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", "-d", "postgres", "-At", "-c", sql)
	return strings.TrimSpace(string(out)), err
}

// run runs one of the server's programs, as the server's user.
func (p *Postgres) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(p.bin, prog), args...)
	if p.user != nil {
		uid, _ := strconv.Atoi(p.user.Uid)
		gid, _ := strconv.Atoi(p.user.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = p.dir
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
		return out, err
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return out, errors.New(prog + " did not finish in 2 minutes")
	}
}

// chown gives path to the server's user (when running as root).
func (p *Postgres) chown(path string) error {
	if p.user == nil {
		return nil
	}
	uid, _ := strconv.Atoi(p.user.Uid)
	gid, _ := strconv.Atoi(p.user.Gid)
	return os.Chown(path, uid, gid)
}
