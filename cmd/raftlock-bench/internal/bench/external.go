package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Driver runs the clients of scenarios (a), (b) and (c) in another
// process: a program that drives a client library of another language
// (Python, Java) through its own public API, so that the same scenarios,
// probes and result lines measure every client. The program speaks the
// driver protocol (cmd/raftlock-bench/README.md, "Other clients"): it
// gets its work as flags, prints one JSON object per line on stdout
// (logs go to stderr) and reads one command per line on stdin.
type Driver struct {
	// Name names the client in results: the system becomes
	// "raftlock-"+Name.
	Name string
	// Argv is the program and its own leading arguments.
	Argv []string
}

// ExternalSystem is a System whose clients may run in a Driver.
type ExternalSystem interface {
	System
	// Driver returns the driver of the run, nil when the clients run in
	// this process.
	Driver() *Driver
	// Addrs returns the addresses the clients start with (the leader's
	// first under --route leader).
	Addrs() []string
}

// KeepAliveCounter is a System that can count the keepalives its leader
// served (raftlock: raftlock_keepalives_total of GET /metrics), so that a
// driver's session load is measured without trusting the client.
type KeepAliveCounter interface {
	KeepAlivesServed(ctx context.Context) (int64, error)
}

// driverMsg is one line a driver prints.
type driverMsg struct {
	Event string `json:"event"`
	// PIDs (ready) are the driver's child processes running clients,
	// whose CPU counts as the client's.
	PIDs      []int   `json:"pids"`
	Pairs     int64   `json:"pairs"`
	Errors    int64   `json:"errors"`
	LatUs     []int64 `json:"lat_us"`
	LastError string  `json:"last_error"`
	// Sessions mode, since the opens: sessions the client saw expire,
	// and times a session entered jeopardy.
	Expired  int64 `json:"expired"`
	Jeopardy int64 `json:"jeopardy"`
}

// driverProc is a running driver.
type driverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error

	finishOnce sync.Once
	finishErr  error
}

// driverWait bounds how long a driver may take to open its clients or
// answer a command, and to exit once told to stop.
const driverWait = 5 * time.Minute

func startDriver(d *Driver, args []string) (*driverProc, error) {
	if len(d.Argv) == 0 {
		return nil, errors.New("driver: no command")
	}
	cmd := exec.Command(d.Argv[0], append(append([]string{}, d.Argv[1:]...), args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("driver %s: %w", d.Name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("driver %s: %w", d.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("driver %s: start %q: %w", d.Name, d.Argv, err)
	}
	p := &driverProc{cmd: cmd, stdin: in, lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	return p, nil
}

// send writes one command line.
func (p *driverProc) send(cmd string) error {
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return fmt.Errorf("driver: send %q: %w", cmd, err)
	}
	return nil
}

// expect reads the next message, which must be event.
func (p *driverProc) expect(ctx context.Context, event string) (driverMsg, error) {
	t := time.NewTimer(driverWait)
	defer t.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			return driverMsg{}, fmt.Errorf("driver exited before %q", event)
		}
		var m driverMsg
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return m, fmt.Errorf("driver: line %.200q: %w", line, err)
		}
		if m.Event != event {
			return m, fmt.Errorf("driver: got %q, want %q (%s)", m.Event, event, m.LastError)
		}
		return m, nil
	case <-ctx.Done():
		return driverMsg{}, ctx.Err()
	case <-t.C:
		return driverMsg{}, fmt.Errorf("driver: no %q in %v", event, driverWait)
	}
}

// finish closes the driver's stdin (its cue to close its sessions and
// exit) and waits for it, killing it after driverWait. Repeated calls
// return the first call's outcome.
func (p *driverProc) finish() error {
	p.finishOnce.Do(func() { p.finishErr = p.stop() })
	return p.finishErr
}

func (p *driverProc) stop() error {
	p.stdin.Close()
	t := time.NewTimer(driverWait)
	defer t.Stop()
	for {
		select {
		case _, ok := <-p.lines:
			if ok {
				continue
			}
			select {
			case err := <-p.done:
				if err != nil {
					return fmt.Errorf("driver: %w", err)
				}
				return nil
			case <-t.C:
			}
		case <-t.C:
		}
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("driver: still running %v after stop: killed", driverWait)
	}
}

func (p *driverProc) pid() int { return p.cmd.Process.Pid }

// runExternal runs scenario (a), (b) or (c) with the clients in sys's
// driver; (d) needs the kills of this process's load and is refused.
func runExternal(ctx context.Context, sys ExternalSystem, o *Options, prefix string) (Result, error) {
	switch o.Scenario {
	case Uncontended:
		r, err := runExternalPairs(ctx, sys, o, prefix+"/a", false)
		r.Unit = "pairs/s"
		return r, err
	case Contended:
		r, err := runExternalPairs(ctx, sys, o, prefix+"/b", true)
		r.Unit = "handoffs/s"
		return r, err
	case Sessions:
		return runSessions(ctx, sys, o, prefix+"/c")
	}
	return Result{}, fmt.Errorf("scenario %s: not run by a driver (only uncontended, contended, sessions)", o.Scenario)
}

// runExternalPairs is scenarios (a) and (b) with the clients in a driver:
// it opens o.Clients sessions, loops pairs, and reports what it counted
// between "measure" and "stop"; the probes here measure the window, the
// driver's CPU included in client_cpu_pct.
func runExternalPairs(ctx context.Context, sys ExternalSystem, o *Options, lock string, shared bool) (Result, error) {
	r := Result{Clients: o.Clients}
	args := []string{"--mode", "pairs", "--addr", strings.Join(sys.Addrs(), ","), "--clients", strconv.Itoa(o.Clients),
		"--lock", lock, "--ttl", o.TTL.String()}
	if shared {
		args = append(args, "--shared")
	}
	p, err := startDriver(sys.Driver(), args)
	if err != nil {
		return r, err
	}
	defer func() { _ = p.finish() }()
	ready, err := p.expect(ctx, "ready")
	if err != nil {
		return r, err
	}
	pids := append([]int{p.pid()}, ready.PIDs...)
	id, pid := leaderPID(ctx, sys, o)
	if err := sleepCtx(ctx, o.Warmup); err != nil {
		return r, err
	}
	c0, _ := sumCPU(pids)
	probe := StartCPUProbe(pid, o.PIDs)
	start := time.Now()
	if err := p.send("measure"); err != nil {
		return r, err
	}
	if err := sleepCtx(ctx, o.Duration); err != nil {
		return r, err
	}
	if err := p.send("stop"); err != nil {
		return r, err
	}
	m, err := p.expect(ctx, "result")
	elapsed := time.Since(start)
	c1, cerr := sumCPU(pids)
	probe.Finish(&r)
	if err != nil {
		return r, err
	}
	if cerr == nil {
		// The driver's CPU joins this process's (which only waits).
		r.SetMetric(MetricClientCPU, round1(r.Metrics[MetricClientCPU]+100*float64(c1-c0)/float64(elapsed)))
	}
	lat := &Latencies{}
	for _, us := range m.LatUs {
		lat.Add(time.Duration(us) * time.Microsecond)
	}
	fillRate(&r, m.Pairs, m.Errors, elapsed, lat)
	perOp(&r)
	if id2, _ := leaderPID(ctx, sys, o); id != "" && id2 != id {
		r.Notes = append(r.Notes, fmt.Sprintf("leader changed from %s to %s during the run", id, id2))
	}
	if err := p.finish(); err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
	if m.Pairs == 0 {
		return r, fmt.Errorf("no pair completed in %v (last error: %s)", elapsed, m.LastError)
	}
	return r, nil
}

// sumCPU returns the CPU time the processes have used.
func sumCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		c, err := ProcCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// Names of the per-operation CPU figures of (a) and (b).
const (
	MetricClientCPUPerOp  = "client_cpu_us_per_op"  // client CPU / operations, µs
	MetricServersCPUPerOp = "servers_cpu_us_per_op" // all servers' CPU / operations, µs
)

// perOp adds the CPU per operation from the percentages and the rate.
func perOp(r *Result) {
	if r.Rate <= 0 {
		return
	}
	if v, ok := r.Metrics[MetricClientCPU]; ok {
		r.SetMetric(MetricClientCPUPerOp, round1(v/100*1e6/r.Rate))
	}
	if v, ok := r.Metrics[MetricServersCPU]; ok {
		r.SetMetric(MetricServersCPUPerOp, round1(v/100*1e6/r.Rate))
	}
}

// driverSessions is the SessionLoad of scenario (c) with the sessions in a
// driver: each a Session of the client (its own keepalive loop, as a user
// runs it), holding one lock when told. Keepalives are counted by the
// leader (KeepAliveCounter); lapsed counts the sessions the client saw in
// jeopardy or expired (the client's API does not say which side ended a
// lease, so spurious expiries are not told apart).
type driverSessions struct {
	sys    ExternalSystem
	o      *Options
	prefix string

	mu       sync.Mutex
	p        *driverProc
	last     KeepAliveStats // the last figures, kept once the driver is gone
	acked0   int64
	countErr error
}

// NewDriverSessions returns the session load of (c) run by sys's driver.
func NewDriverSessions(sys ExternalSystem, o *Options, lockPrefix string) SessionLoad {
	return &driverSessions{sys: sys, o: o, prefix: lockPrefix}
}

func (d *driverSessions) Open(ctx context.Context, n int, lat *Latencies) (int64, error) {
	args := []string{"--mode", "sessions", "--addr", strings.Join(d.sys.Addrs(), ","),
		"--sessions", strconv.Itoa(n), "--workers", strconv.Itoa(d.o.Workers), "--lock", d.prefix, "--ttl", d.o.TTL.String()}
	if d.o.OpenRate > 0 {
		args = append(args, "--open-rate", strconv.FormatFloat(d.o.OpenRate, 'g', -1, 64))
	}
	p, err := startDriver(d.sys.Driver(), args)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.p = p
	d.mu.Unlock()
	m, err := p.expect(ctx, "ready")
	if err != nil {
		return 0, err
	}
	for _, us := range m.LatUs {
		lat.Add(time.Duration(us) * time.Microsecond)
	}
	if kc, ok := d.sys.(KeepAliveCounter); ok {
		d.acked0, d.countErr = kc.KeepAlivesServed(ctx)
	}
	return m.Errors, nil
}

func (d *driverSessions) Hold(ctx context.Context, n int) error {
	if err := d.p.send("hold " + strconv.Itoa(n)); err != nil {
		return err
	}
	_, err := d.p.expect(ctx, "held")
	return err
}

func (d *driverSessions) Stats() KeepAliveStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.last
	if d.p == nil {
		return st
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if kc, ok := d.sys.(KeepAliveCounter); ok && d.countErr == nil {
		if v, err := kc.KeepAlivesServed(ctx); err == nil {
			st.Acked = v - d.acked0
		}
	}
	if d.p.send("stats") == nil {
		if m, err := d.p.expect(ctx, "stats"); err == nil {
			st.Lapsed = m.Expired + m.Jeopardy
		}
	}
	d.last = st
	return st
}

func (d *driverSessions) Close(ctx context.Context) error {
	d.mu.Lock()
	p := d.p
	d.mu.Unlock()
	if p == nil {
		return nil
	}
	d.Stats() // the figures of the window's end, kept
	err := p.finish()
	d.mu.Lock()
	d.p = nil
	d.mu.Unlock()
	return err
}
