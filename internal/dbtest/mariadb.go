package dbtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MariaDB is a running MariaDB (or MySQL) server.
type MariaDB struct {
	// DSN is a go-sql-driver/mysql DSN of its database "test" as root,
	// over TCP, without a password.
	DSN  string
	Port int
	dir  string
	cmd  *exec.Cmd
	exit chan struct{}
}

// StartMariaDB starts a MariaDB server for the test on 127.0.0.1:port
// (port from reserve) with a database "test", and stops it when the test
// ends. The test is skipped when no server is installed (Debian:
// mariadb-server), unless RAFTLOCK_REQUIRE_MARIADB=1 (CI), when it fails.
func StartMariaDB(t TB, reserve func() int) *MariaDB {
	t.Helper()
	server, install := lookMariaDB()
	if server == "" {
		if os.Getenv("RAFTLOCK_REQUIRE_MARIADB") == "1" {
			t.Fatalf("no MariaDB server installed (apt-get install mariadb-server), and RAFTLOCK_REQUIRE_MARIADB=1")
		}
		t.Skipf("no MariaDB server installed (apt-get install mariadb-server)")
	}
	dir, err := os.MkdirTemp("", "raftlock-maria-")
	if err != nil {
		t.Fatalf("mariadb dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &MariaDB{Port: reserve(), dir: dir, exit: make(chan struct{})}
	data := filepath.Join(dir, "data")
	out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	log := filepath.Join(dir, "log")
	m.cmd = exec.Command(server, "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--port="+strconv.Itoa(m.Port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "sock"),
		"--pid-file="+filepath.Join(dir, "pid"), "--log-error="+log, "--skip-name-resolve",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M")
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	go func() {
		_ = m.cmd.Wait()
		close(m.exit)
	}()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.exit
	})
	admin := filepath.Join(filepath.Dir(install), "mariadb")
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command(admin, "--no-defaults", "-h", "127.0.0.1", "-P", strconv.Itoa(m.Port), "-u", "root",
			"-e", "CREATE DATABASE IF NOT EXISTS test").CombinedOutput()
		if err == nil {
			break
		}
		select {
		case <-m.exit:
			l, _ := os.ReadFile(log)
			t.Fatalf("mariadbd exited: %s", l)
		default:
		}
		if time.Now().After(deadline) {
			l, _ := os.ReadFile(log)
			t.Fatalf("mariadbd did not serve in 60s: %v: %s\n%s", err, out, l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?timeout=5s", m.Port)
	return m
}

// lookMariaDB returns the server and mariadb-install-db programs, or "".
func lookMariaDB() (server, install string) {
	for _, s := range []string{"/usr/sbin/mariadbd", "/usr/sbin/mysqld"} {
		if _, err := os.Stat(s); err == nil {
			server = s
			break
		}
	}
	i, err := exec.LookPath("mariadb-install-db")
	if err != nil || server == "" {
		return "", ""
	}
	return server, i
}

// currentUser is the name of the user the process runs as ("root" under
// CI): mariadbd runs as root only when told so.
func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return strings.TrimSpace(u)
	}
	return "nobody"
}
