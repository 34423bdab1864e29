package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/dbtest"
	"github.com/raftlock/raftlock/internal/freeport"
)

// postgresResource makes a real PostgreSQL server, started for the test,
// cfg's protected resource (every write a transaction fenced by the SQL
// fence). Where no server is installed it leaves the in-memory resource,
// with a note; in CI (RAFTLOCK_REQUIRE_POSTGRES=1, set by .ci/run, which
// installs it) that is a failure instead.
func postgresResource(t *testing.T, cfg *Config) {
	t.Helper()
	if dbtest.PostgresBinDir() == "" && os.Getenv("RAFTLOCK_REQUIRE_POSTGRES") != "1" {
		t.Logf("SKIPPING the PostgreSQL resource: no PostgreSQL server installed; the writes go to the in-memory fence")
		return
	}
	pg := dbtest.StartPostgres(t, func() int {
		r, err := freeport.Reserve("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r.Port
	})
	cfg.ResourcePostgres = pg.DSN
}

// postgresConfig is testConfig with a PostgreSQL server as the resource;
// the test is skipped where none is installed (not in CI).
func postgresConfig(t *testing.T) Config {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real cluster, client processes and a PostgreSQL server")
	}
	cfg := testConfig(t, "")
	postgresResource(t, &cfg)
	if cfg.ResourcePostgres == "" {
		t.Skip("no PostgreSQL server installed")
	}
	cfg.Clients, cfg.Locks = 4, 1
	cfg.GapMin, cfg.GapMax = 500*time.Millisecond, time.Second
	return cfg
}

// TestLateWritesAreRefusedByTheSQLFence holds holders' writes on their way
// to a real PostgreSQL until the next holder has written (late-write), and
// partitions and pauses holders: the SQL fence refuses every late write,
// the database's own record keeps every lock's tokens in order, and no
// check fails.
func TestLateWritesAreRefusedByTheSQLFence(t *testing.T) {
	cfg := postgresConfig(t)
	cfg.Faults = []string{faultLateWrite, faultPauseClient, faultPartitionClient}
	dropPartitions(t, &cfg)
	cfg.Duration = 75 * time.Second
	cfg.Seed = 3
	rep := runLogged(t, cfg)
	requireClean(t, rep, cfg.Out)
	if rep.Faults[faultLateWrite] == 0 {
		t.Fatalf("no write was held late")
	}
	if late := rep.LateAfterNewer; late == 0 {
		t.Errorf("no held write landed after a newer holder's: the run proves nothing of the fence (%d late-write faults)", rep.Faults[faultLateWrite])
	}
}

// TestCatchesUnfencedSQLWriter shows that the checker fails a writer that
// trusts its lock alone (--unsafe-unfenced-writer: the database resource
// skips the SQL fence): a late write lands after a newer holder's, and both
// the fencing check and the database's own record see it.
func TestCatchesUnfencedSQLWriter(t *testing.T) {
	cfg := postgresConfig(t)
	cfg.UnfencedWriter = true
	cfg.Faults = []string{faultLateWrite}
	cfg.Duration = 60 * time.Second
	cfg.Seed = 7
	cfg.StopOnViolation = true
	rep := runLogged(t, cfg)
	db := 0
	for _, v := range rep.Violations {
		if v.Check == checkFencing && strings.HasPrefix(v.What, "database: ") {
			db++
		}
	}
	if rep.count(checkFencing) == 0 || db == 0 {
		t.Errorf("the checker passed an unfenced writer: %d fencing violations, %d of them in the database's record (%d late writes)",
			rep.count(checkFencing), db, rep.Faults[faultLateWrite])
	}
}
