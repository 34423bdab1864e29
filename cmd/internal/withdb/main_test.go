package main

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withdb gives the command both servers' addresses, serving while it runs,
// passes on its exit code, and stops the servers when it ends.
func TestWithdbServesTheCommandAndStopsAfterIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts database servers")
	}
	out := filepath.Join(t.TempDir(), "env")
	// The command checks that both servers accept connections while it runs.
	script := `env | grep '^RAFTLOCK_TEST_' > "$1"
for v in "$RAFTLOCK_TEST_PG_DSN" "$RAFTLOCK_TEST_MYSQL_DSN"; do
  port=$(printf '%s' "$v" | sed -E 's#.*127[.]0[.]0[.]1:([0-9]+)/.*#\1#')
  (exec 3<>"/dev/tcp/127.0.0.1/$port") || exit 9
done
exit 7`
	if code := run([]string{"bash", "-c", script, "bash", out}); code != 7 {
		t.Fatalf("exit code %d, want the command's 7 (9: a server did not accept a connection)", code)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	for _, k := range []string{"RAFTLOCK_TEST_PG_DSN", "RAFTLOCK_TEST_PG_JDBC", "RAFTLOCK_TEST_MYSQL_DSN", "RAFTLOCK_TEST_MYSQL_JDBC"} {
		if env[k] == "" {
			t.Errorf("%s not set (a server missing? then RAFTLOCK_REQUIRE_* must make withdb fail)", k)
		}
	}
	if !strings.HasPrefix(env["RAFTLOCK_TEST_PG_JDBC"], "jdbc:postgresql://127.0.0.1:") ||
		!strings.HasPrefix(env["RAFTLOCK_TEST_MYSQL_JDBC"], "jdbc:mariadb://127.0.0.1:") {
		t.Errorf("JDBC URLs: %v", env)
	}
	// After withdb returned, neither server listens any more.
	for _, k := range []string{"RAFTLOCK_TEST_PG_DSN", "RAFTLOCK_TEST_MYSQL_DSN"} {
		u, err := url.Parse(env[k])
		if err != nil || u.Hostname() != "127.0.0.1" {
			t.Fatalf("%s = %q: want a URL on 127.0.0.1 (%v)", k, env[k], err)
		}
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("%s: %s still accepts connections after withdb ended", k, u.Host)
		}
	}
}
