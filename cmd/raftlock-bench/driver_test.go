package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

// TestPythonDriverThroughTheClientsAPI runs scenarios a and c with the
// Python client's driver (clients/python/bench) against three raftlockd
// processes: pairs counted, keepalives counted by the servers, no lapse.
func TestPythonDriverThroughTheClientsAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	script, err := filepath.Abs("../../clients/python/bench/raftlock_bench.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
	cl := startCluster(t)
	common := []string{"--addr", cl.AddrList(), "--pids", cl.PIDList(), "--driver", "python", "--driver-cmd", py + " " + script}

	a := runJSON(t, append(common, "--scenario", "a", "--clients", "2", "--duration", "1s", "--warmup", "200ms")...)
	if a.System != "raftlock-python" || a.Ops == 0 || a.Errors != 0 || a.P50ms <= 0 || a.P99ms < a.P50ms {
		t.Errorf("uncontended: %+v", a)
	}
	if v := a.Metrics[bench.MetricClientCPUPerOp]; v <= 0 {
		t.Errorf("uncontended: no client CPU per pair (the driver's): %+v", a.Metrics)
	}

	c := runJSON(t, append(common, "--scenario", "c", "--sessions", "10", "--session-time", "2500ms",
		"--ttl", "1s", "--workers", "4", "--open-rate", "20")...)
	if c.Ops != 10 || c.Metrics[bench.MetricLapsed] != 0 || c.Metrics[bench.MetricKeepAlivesPerS] <= 0 {
		t.Errorf("sessions: %+v", c)
	}
}

// TestJavaDriverThroughTheClientsAPI runs scenarios a and c with the Java
// client's driver (clients/java/bench-driver; needs what `mvn install`
// built: RAFTLOCK_JAVA_WORKER=1, as CI sets after it).
func TestJavaDriverThroughTheClientsAPI(t *testing.T) {
	if os.Getenv("RAFTLOCK_JAVA_WORKER") != "1" {
		t.Skip("RAFTLOCK_JAVA_WORKER=1 runs it (after cd clients/java && mvn install)")
	}
	driver, err := filepath.Abs("../../clients/java/bench-driver")
	if err != nil {
		t.Fatal(err)
	}
	cl := startCluster(t)
	a := runJSON(t, "--addr", cl.AddrList(), "--pids", cl.PIDList(), "--driver", "java", "--driver-cmd", driver,
		"--scenario", "a", "--clients", "2", "--duration", "1s", "--warmup", "500ms")
	if a.System != "raftlock-java" || a.Ops == 0 || a.Errors != 0 || a.P50ms <= 0 {
		t.Errorf("uncontended: %+v", a)
	}
	c := runJSON(t, "--addr", cl.AddrList(), "--pids", cl.PIDList(), "--driver", "java", "--driver-cmd", driver,
		"--scenario", "c", "--sessions", "10", "--session-time", "2500ms", "--ttl", "1s", "--workers", "4", "--open-rate", "20")
	if c.Ops != 10 || c.Metrics[bench.MetricLapsed] != 0 || c.Metrics[bench.MetricKeepAlivesPerS] <= 0 {
		t.Errorf("sessions: %+v", c)
	}
}
