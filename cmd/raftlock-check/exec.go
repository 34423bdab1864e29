package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/sequencer"
)

// The exec holders (--exec-clients): each runs `raftlock exec NAME --
// WRITER` again and again, WRITER being this binary's exec-writer mode
// (exec_writer.go), which writes to the run's resource with the sequencer
// exec hands it until the checker tells it to stop (the end of its
// tenure: exec then releases the lock and exits 0) or it is killed. The
// kill-exec and freeze-exec faults aim at them (exec_faults.go); the
// fencing check judges their writes, and checkExecWriters that each
// writer is dead before its lock is granted to anyone else.

// cliPackage is the import path of the raftlock CLI.
const cliPackage = "github.com/raftlock/raftlock/cmd/raftlock"

// execKillGrace is the exec holders' --kill-grace.
const execKillGrace = time.Second

// Tenures of the exec holders' writers (unless a fault aims at them).
const execHoldMin, execHoldMax = 300 * time.Millisecond, 1500 * time.Millisecond

// buildCLI builds the raftlock CLI into dir (with faults, the build with
// exec's --unsafe-no-guard, -tags raftlock_faults).
func buildCLI(ctx context.Context, dir string, faults bool) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build raftlock: the go command is not on PATH (or pass --raftlock): %w", err)
	}
	bin := filepath.Join(dir, "raftlock")
	args := []string{"build", "-o", bin}
	if faults {
		args = append(args, "-tags", faultsTag)
	}
	out, err := exec.CommandContext(ctx, gobin, append(args, cliPackage)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s (run inside the raftlock module, or pass --raftlock): %w\n%s", cliPackage, err, out)
	}
	return bin, nil
}

// execLive is an exec process of an exec holder while it runs.
type execLive struct {
	rec  int // index in execHolders.recs
	proc *os.Process
	// key is its grant's lock (slot), once its writer said hello.
	key string
	// watch is the writer's pidfd (nil before its hello, or once it is
	// seen dead: dead).
	watch *pidWatch
	dead  bool
	// stopAt is when its writer is told to stop (its tenure's end);
	// targeted: a fault aims at it, and its writer is never told.
	stopAt   int64
	targeted bool
}

// grantWait is a wish to hear of a grant of key with a token above min.
type grantWait struct {
	key string
	min uint64
	ch  chan struct{}
}

// execHolders runs a run's exec holders.
type execHolders struct {
	cfg     Config
	cli     string   // the raftlock binary
	writer  []string // the writer's command line
	env     [][]string
	locks   []string
	res     fencedResource
	hist    *historyLog
	dir     string
	ln      net.Listener
	clients int // the run's clients: exec holder j writes as client clients+j
	permits int

	mu       sync.Mutex
	recs     []ExecRec
	live     map[string]*execLive // "J/R" -> its exec
	waits    []grantWait
	stopping bool
	// watched are every writer that said hello, its exec running or not:
	// one whose exec ended and that is not seen dead is an orphan, which
	// the run's end kills.
	watched []*execLive
	wg      sync.WaitGroup
}

// startExecHolders starts cfg.ExecClients exec holders contending for
// locks; env[j] is holder j's environment (addresses, TLS, ACL token).
func startExecHolders(ctx context.Context, cfg Config, cli string, env [][]string, locks []string, res fencedResource, hist *historyLog, dir string) (*execHolders, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("exec holders: find own executable: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("exec holders: listen for writers: %w", err)
	}
	xs := &execHolders{cfg: cfg, cli: cli, writer: []string{self, execWriterCommand}, env: env, locks: locks, res: res, hist: hist,
		dir: dir, ln: ln, clients: cfg.Clients, permits: cfg.Permits, live: map[string]*execLive{}}
	go xs.accept()
	for j := 0; j < cfg.ExecClients; j++ {
		xs.wg.Add(1)
		go xs.holder(ctx, j, rand.New(rand.NewSource(cfg.Seed*1000+500+int64(j))))
	}
	return xs, nil
}

// holder runs exec holder j's exec processes, one after another, until
// ctx ends or the run stops.
func (xs *execHolders) holder(ctx context.Context, j int, rng *rand.Rand) {
	defer xs.wg.Done()
	logf, err := os.Create(filepath.Join(xs.dir, fmt.Sprintf("exec%d.log", j)))
	if err != nil {
		return
	}
	defer logf.Close()
	for r := 0; ; r++ {
		xs.mu.Lock()
		stop := xs.stopping
		xs.mu.Unlock()
		if stop || ctx.Err() != nil {
			return
		}
		xs.runOne(j, r, xs.locks[rng.Intn(len(xs.locks))], logf)
		if !sleep(ctx, time.Duration(50+rng.Intn(250))*time.Millisecond) {
			return
		}
	}
}

// runOne runs one exec process of holder j for lock and records it.
func (xs *execHolders) runOne(j, r int, lock string, logf *os.File) {
	args := []string{"exec", "--ttl", xs.cfg.TTL.String(), "--lock-delay", xs.cfg.LockDelay.String(),
		"--kill-grace", execKillGrace.String()}
	if xs.permits > 0 {
		args = append(args, "-n", strconv.Itoa(xs.permits))
	}
	if xs.cfg.UnsafeExecNoGuard {
		args = append(args, "--unsafe-no-guard")
	}
	args = append(append(args, lock, "--"), xs.writer...)
	cmd := exec.Command(xs.cli, args...)
	id := fmt.Sprintf("%d/%d", j, r)
	cmd.Env = append(append(os.Environ(), xs.env[j]...), envWriterAddr+"="+xs.ln.Addr().String(), envWriterExec+"="+id)
	cmd.SysProcAttr = childAttr()
	// Not a pipe read to its end: a writer that outlives exec (no guard)
	// holds exec's stderr open.
	stderr := &execStderr{logf: logf}
	cmd.Stderr, cmd.WaitDelay = stderr, time.Second
	xs.mu.Lock()
	if xs.stopping {
		xs.mu.Unlock()
		return
	}
	if err := cmd.Start(); err != nil {
		xs.mu.Unlock()
		fmt.Fprintf(logf, "%s start exec: %v\n", stamp(monoNow()), err)
		return
	}
	xs.recs = append(xs.recs, ExecRec{Exec: j, Run: r, Client: xs.clients + j, Lock: lock, Started: monoNow(),
		Acked: pending, WriterDied: pending, Exited: pending})
	l := &execLive{rec: len(xs.recs) - 1, proc: cmd.Process}
	xs.live[id] = l
	xs.mu.Unlock()
	fmt.Fprintf(logf, "%s exec %s pid %d: %s\n", stamp(monoNow()), id, cmd.Process.Pid, strings.Join(args, " "))
	_ = cmd.Wait()
	at := monoNow()
	status := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	reason := stderr.lastCode()
	fmt.Fprintf(logf, "%s exec %s exited %d %s\n", stamp(at), id, status, reason)
	xs.mu.Lock()
	defer xs.mu.Unlock()
	e := &xs.recs[l.rec]
	e.Exited, e.Status, e.Reason = at, status, reason
	if xs.stopping && e.Fault == "" {
		e.RunEnd = true
	}
	delete(xs.live, id)
}

// execStderr takes an exec's stderr into its holder's log, line by
// line, and keeps the code of its last "raftlock: CODE: ..." line.
type execStderr struct {
	mu     sync.Mutex
	logf   *os.File
	part   []byte
	reason string
}

func (s *execStderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.part = append(s.part, p...)
	for {
		line, rest, ok := strings.Cut(string(s.part), "\n")
		if !ok {
			return len(p), nil
		}
		s.part = []byte(rest)
		fmt.Fprintf(s.logf, "%s %s\n", stamp(monoNow()), line)
		if after, ok := strings.CutPrefix(line, "raftlock: "); ok {
			if code, _, ok := strings.Cut(after, ":"); ok && !strings.Contains(code, " ") {
				s.reason = code
			}
		}
	}
}

// lastCode is the code of the last "raftlock: CODE: ..." line so far.
func (s *execStderr) lastCode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// accept takes the writers' connections.
func (xs *execHolders) accept() {
	for {
		c, err := xs.ln.Accept()
		if err != nil {
			return
		}
		go xs.serve(c)
	}
}

// serve answers one writer: its hello, then its writes.
func (xs *execHolders) serve(c net.Conn) {
	defer c.Close()
	dec, enc := json.NewDecoder(bufio.NewReader(c)), json.NewEncoder(c)
	var hello writerMsg
	if err := dec.Decode(&hello); err != nil || hello.T != "hello" {
		return
	}
	l, e, ok := xs.hello(hello)
	if !ok {
		_ = enc.Encode(writerMsg{Err: "unknown exec " + hello.Exec, Stop: true})
		return
	}
	if err := enc.Encode(writerMsg{OK: true}); err != nil {
		return
	}
	for {
		var m writerMsg
		if err := dec.Decode(&m); err != nil {
			return
		}
		w := xs.res.write(e.Client, message{Lock: e.Lock, Session: e.Session, Token: e.Token, Seq: m.Seq})
		xs.hist.addWrite(w)
		xs.mu.Lock()
		r := &xs.recs[l.rec]
		r.AliveAt = max(r.AliveAt, m.At)
		stop := !l.targeted && (xs.stopping || monoNow() >= l.stopAt)
		xs.mu.Unlock()
		if err := enc.Encode(writerMsg{OK: w.Accepted, Err: w.Err, Stop: stop}); err != nil {
			return
		}
	}
}

// hello takes in a writer's hello: its grant (from its sequencer), its
// pid (watched from now on), and the proof that every other writer of the
// same lock (slot) still running outlived this grant.
func (xs *execHolders) hello(m writerMsg) (*execLive, ExecRec, bool) {
	seq, err := sequencer.Parse(m.Seq)
	if err != nil {
		return nil, ExecRec{}, false
	}
	watch, werr := watchPID(m.PID)
	xs.mu.Lock()
	defer xs.mu.Unlock()
	l, ok := xs.live[m.Exec]
	if !ok || l.key != "" {
		if watch != nil {
			watch.close()
		}
		return nil, ExecRec{}, false
	}
	e := &xs.recs[l.rec]
	e.Session, e.Token, e.Seq, e.Acked, e.WriterPID, e.AliveAt = m.Session, uint64(seq.Token), m.Seq, m.At, m.PID, m.At
	e.Semaphore, e.Slot = seq.Semaphore, seq.Slot
	l.key = slotLock(e.Lock, e.Slot)
	l.stopAt = monoNow() + int64(execHoldMin) + rand.Int63n(int64(execHoldMax-execHoldMin))
	// Every other writer of this lock (slot) seen alive now ran after
	// this grant: its hello came after the grant.
	for _, o := range xs.watched {
		if o.key != l.key || o.dead {
			continue
		}
		at := monoNow()
		if !o.watch.exited() {
			r := &xs.recs[o.rec]
			r.AliveAt = max(r.AliveAt, at)
		}
	}
	if werr == nil {
		l.watch = watch
		xs.watched = append(xs.watched, l)
		go xs.awaitDeath(l, watch)
	} else {
		// Gone already (or not to be watched): seen dead now.
		l.dead = true
		e.WriterDied = monoNow()
	}
	kept := xs.waits[:0]
	for _, w := range xs.waits {
		if w.key == l.key && uint64(seq.Token) > w.min {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	xs.waits = kept
	return l, *e, true
}

// awaitDeath records when l's writer exits.
func (xs *execHolders) awaitDeath(l *execLive, w *pidWatch) {
	w.wait()
	at := monoNow()
	xs.mu.Lock()
	defer xs.mu.Unlock()
	l.dead = true
	xs.recs[l.rec].WriterDied = at
	w.close()
}

// grantAbove returns a channel closed once key (a lock's slotLock) is
// granted to an exec holder with a token above min.
func (xs *execHolders) grantAbove(key string, min uint64) <-chan struct{} {
	xs.mu.Lock()
	defer xs.mu.Unlock()
	ch := make(chan struct{})
	xs.waits = append(xs.waits, grantWait{key: key, min: min, ch: ch})
	return ch
}

// stop ends the run's exec holders: every writer is told to stop at its
// next write, and exec processes still running after grace are killed,
// with the writers not seen dead.
func (xs *execHolders) stop(grace time.Duration) {
	xs.mu.Lock()
	xs.stopping = true
	xs.killOrphans(false)
	for _, l := range xs.live {
		_ = l.proc.Signal(syscall.SIGCONT)
		if l.key == "" {
			// Still waiting for the lock: it gives up.
			_ = l.proc.Signal(syscall.SIGTERM)
		}
	}
	xs.mu.Unlock()
	done := make(chan struct{})
	go func() {
		xs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		xs.mu.Lock()
		for _, l := range xs.live {
			xs.recs[l.rec].RunEnd = true
			_ = l.proc.Signal(syscall.SIGKILL)
		}
		xs.killOrphans(true)
		xs.mu.Unlock()
		<-done
	}
	xs.mu.Lock()
	xs.killOrphans(true)
	xs.mu.Unlock()
	_ = xs.ln.Close()
}

// killOrphans SIGKILLs the writers not seen dead whose exec has ended or
// was SIGKILLed (kill-exec), or with all every writer not seen dead
// (xs.mu held).
func (xs *execHolders) killOrphans(all bool) {
	for _, o := range xs.watched {
		e := xs.recs[o.rec]
		if !o.dead && e.WriterPID > 0 && (all || e.Exited != pending || e.Fault == faultKillExec) {
			_ = syscall.Kill(e.WriterPID, syscall.SIGKILL)
		}
	}
}

// snapshot returns the exec records so far.
func (xs *execHolders) snapshot() []ExecRec {
	if xs == nil {
		return nil
	}
	xs.mu.Lock()
	defer xs.mu.Unlock()
	return append([]ExecRec(nil), xs.recs...)
}

// holding picks a running exec whose writer holds its grant, is alive and
// has not been told to stop, and marks it targeted by fault (ok false:
// none).
func (xs *execHolders) holding(rng *rand.Rand, fault string) (l *execLive, e ExecRec, ok bool) {
	xs.mu.Lock()
	defer xs.mu.Unlock()
	var pool []*execLive
	now := monoNow()
	for _, o := range xs.live {
		if o.key != "" && !o.dead && !o.targeted && now < o.stopAt-int64(50*time.Millisecond) && !xs.stopping {
			pool = append(pool, o)
		}
	}
	if len(pool) == 0 {
		return nil, ExecRec{}, false
	}
	// Map order is random: sort by record for a seeded choice.
	for i := 1; i < len(pool); i++ {
		for k := i; k > 0 && pool[k].rec < pool[k-1].rec; k-- {
			pool[k], pool[k-1] = pool[k-1], pool[k]
		}
	}
	l = pool[rng.Intn(len(pool))]
	l.targeted = true
	xs.recs[l.rec].Fault = fault
	return l, xs.recs[l.rec], true
}

// update changes l's record under the lock.
func (xs *execHolders) update(l *execLive, f func(e *ExecRec)) ExecRec {
	xs.mu.Lock()
	defer xs.mu.Unlock()
	f(&xs.recs[l.rec])
	return xs.recs[l.rec]
}

// execEnv is exec holder j's environment: the cluster's addresses, TLS
// files and ACL token (secret; "" without ACLs).
func execEnv(addrs []string, certs *certFiles, secret string) []string {
	env := []string{"RAFTLOCK_ADDR=" + strings.Join(addrs, ",")}
	if certs != nil {
		env = append(env, "RAFTLOCK_CACERT="+certs.CA, "RAFTLOCK_CERT="+certs.ClientCert, "RAFTLOCK_KEY="+certs.ClientKey)
	}
	if secret != "" {
		env = append(env, "RAFTLOCK_ACL_TOKEN="+secret)
	}
	return env
}

// startRunExecs starts a run's exec holders against cluster cl: holder j
// with tokens[j]'s secret (ACLs on), for (ExecClients+1)/2 locks of their
// own (check/exec0, ...), so that two holders contend for each.
func startRunExecs(ctx context.Context, cfg Config, cl *cluster, tokens []clientToken, dir string, hist *historyLog, res fencedResource) (*execHolders, error) {
	var env [][]string
	for j := 0; j < cfg.ExecClients; j++ {
		secret := ""
		if j < len(tokens) {
			secret = tokens[j].secret
		}
		env = append(env, execEnv(cl.apiAddrs(), cl.certs, secret))
	}
	var locks []string
	for i := 0; i < (cfg.ExecClients+1)/2; i++ {
		locks = append(locks, fmt.Sprintf("%sexec%d", lockPrefix, i))
	}
	return startExecHolders(ctx, cfg, cfg.Raftlock, env, locks, res, hist, dir)
}
