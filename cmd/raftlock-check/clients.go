package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/session"
)

// clientProc is one client process, seen from the checker.
type clientProc struct {
	idx  int
	cmd  *exec.Cmd
	logf *os.File
	done chan struct{} // closed when its output ended and it exited

	wmu   sync.Mutex
	stdin io.WriteCloser
	enc   *json.Encoder

	// ids numbers the checker's requests (msgPin); replies matches their
	// answers.
	ids     atomic.Uint64
	replies replyTable

	mu     sync.Mutex
	paused bool
}

// request sends m (given a fresh ID) and waits for the client's answer to
// it, until ctx ends or the client exits.
func (p *clientProc) request(ctx context.Context, m message) (message, error) {
	m.ID = p.ids.Add(1)
	r, err := p.replies.request(ctx, m, p.send, p.done)
	switch {
	case errors.Is(err, errOtherEndGone):
		return message{}, fmt.Errorf("client%d exited before answering %s", p.idx, m.T)
	case err != nil:
		return message{}, fmt.Errorf("client%d: no answer to %s: %w", p.idx, m.T, err)
	}
	return r, nil
}

// send writes one message to the client; errors (a client that exited)
// are ignored.
func (p *clientProc) send(m message) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.enc.Encode(m)
}

func (p *clientProc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *clientProc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The client's process group: the client and its worker, if any.
	if syscall.Kill(-p.cmd.Process.Pid, sig) != nil {
		_ = p.cmd.Process.Signal(sig)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
}

// clientSet is the client processes of a run and the intake of what they
// report.
type clientSet struct {
	procs []*clientProc
	hist  *historyLog
	res   fencedResource
	track *tracker
	// holds are the writes held on their way to the resource (late-write).
	holds writeHolds
}

// startClients starts n client processes against addrs (with TLS, the
// CA and client certificate of certs; with ACLs, client i with the secret
// of tokens[i]).
func startClients(cfg Config, addrs, spares []string, certs *certFiles, tokens []clientToken, locks []string, dir string, hist *historyLog, res fencedResource, track *tracker) (*clientSet, error) {
	cs := &clientSet{hist: hist, res: res, track: track}
	command := cfg.ClientCommand
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable: %w", err)
		}
		command = []string{exe, "client"}
	}
	for i := 0; i < cfg.Clients; i++ {
		cc := clientConfig{Index: i, Addrs: addrs, Locks: locks, Seed: cfg.Seed*1000 + int64(i),
			TTL: cfg.TTL, LockDelay: cfg.LockDelay, Grace: cfg.Grace, SourceIP: clientIP(i), NaiveShare: cfg.NaiveShare, MaxHoldShare: cfg.MaxHoldShare,
			Clients: cfg.Clients, Permits: cfg.Permits, Stream: cfg.ClientProto == protoStream, HTTP2: cfg.ClientProto == protoHTTP2,
			MixedKinds: cfg.MixedKinds, UnsafeClient: cfg.UnsafeClient}
		if i < len(tokens) {
			cc.Token = tokens[i].secret
		}
		if i >= cfg.Clients-cfg.WorkerClients {
			cc.Worker, cc.SpareAddrs = cfg.Worker, spares
		}
		if certs != nil {
			cc.TLSCA, cc.TLSCert, cc.TLSKey = certs.CA, certs.ClientCert, certs.ClientKey
		}
		raw, err := json.Marshal(cc)
		if err != nil {
			cs.kill()
			return nil, fmt.Errorf("client config: %w", err)
		}
		p, err := cs.start(i, command, cfg.ClientEnv, string(raw), dir)
		if err != nil {
			cs.kill()
			return nil, err
		}
		cs.procs = append(cs.procs, p)
	}
	return cs, nil
}

func (cs *clientSet) start(i int, command, env []string, raw, dir string) (*clientProc, error) {
	logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("client%d.log", i)))
	if err != nil {
		return nil, fmt.Errorf("client %d log: %w", i, err)
	}
	cmd := exec.Command(command[0], append(append([]string(nil), command[1:]...), "--config", raw)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("client %d: %w", i, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("client %d: %w", i, err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start client %d: %w", i, err)
	}
	p := &clientProc{idx: i, cmd: cmd, logf: logf, done: make(chan struct{}), stdin: stdin, enc: json.NewEncoder(stdin)}
	go func() {
		cs.intake(p, stdout)
		// Its output ended: it exited (or is about to), and every message
		// it sent has been taken in.
		cs.hist.clientExited(p.idx, monoNow())
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// intake reads a client's messages until its output ends.
func (cs *clientSet) intake(p *clientProc, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintf(p.logf, "checker: bad message %q: %v\n", sc.Text(), err)
			continue
		}
		switch m.T {
		case msgCall:
			cs.hist.record(p.idx, m)
			cs.track.observe(p.idx, m, Op{}, false)
		case msgRet:
			op, ok := cs.hist.record(p.idx, m)
			if ok {
				cs.track.observe(p.idx, m, op, true)
			}
		case msgWrite:
			cs.holds.await(p.idx, m)
			w := cs.res.write(p.idx, m)
			cs.hist.addWrite(w)
			p.send(message{T: msgWriteReply, ID: m.ID, OK: w.Accepted, Err: w.Err})
		case msgHold, msgUnhold, msgLost:
			cs.track.observe(p.idx, m, Op{}, false)
			switch m.T {
			case msgHold:
				cs.hist.addHold(p.idx, m)
			case msgLost:
				cs.hist.lost(p.idx, m)
			}
			fmt.Fprintf(p.logf, "%s %s %s token %d\n", stamp(m.At), m.T, m.Lock, m.Token)
		case msgPinReply:
			p.replies.deliver(m)
			fmt.Fprintf(p.logf, "%s pinned %s token %d: %v\n", stamp(monoNow()), m.Lock, m.Token, m.OK)
		case msgLateCaught:
			p.replies.deliver(m)
			fmt.Fprintf(p.logf, "%s holding the answer granting %s token %d\n", stamp(m.At), m.Lock, m.Token)
		case msgWhereReply:
			p.replies.deliver(m)
			fmt.Fprintf(p.logf, "%s talking to %q\n", stamp(monoNow()), m.Node)
		case msgState:
			if m.Result == session.Expired.String() && m.Session != "" {
				cs.hist.expired(p.idx, m)
			}
			fmt.Fprintf(p.logf, "%s session %s %s %s\n", stamp(m.At), short(m.Session, ""), m.Result, m.Err)
		case msgLog:
			fmt.Fprintf(p.logf, "%s %s\n", stamp(m.At), m.Err)
		}
	}
}

// stamp formats a monoNow time for a log line.
func stamp(t int64) string { return fmt.Sprintf("[%.3f]", float64(t)/1e9) }

// broadcast sends m to every client that is not paused.
func (cs *clientSet) broadcast(m message) {
	for _, p := range cs.procs {
		if !p.isPaused() {
			p.send(m)
		}
	}
}

// where asks every client that is not paused which node it talks to now
// (msgWhere), waiting at most timeout for the answers. It returns the
// address of each client that answered, and how many did.
func (cs *clientSet) where(ctx context.Context, timeout time.Duration) (map[int]string, int) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out = map[int]string{}
		n   int
	)
	for _, p := range cs.procs {
		if p.isPaused() {
			continue
		}
		wg.Add(1)
		go func(p *clientProc) {
			defer wg.Done()
			r, err := p.request(wctx, message{T: msgWhere})
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			n++
			if r.Node != "" {
				out[p.idx] = r.Node
			}
		}(p)
	}
	wg.Wait()
	return out, n
}

// stop resumes every client, asks each to finish, and kills those that do
// not exit within grace.
func (cs *clientSet) stop(grace time.Duration) {
	for _, p := range cs.procs {
		p.signal(syscall.SIGCONT)
		p.send(message{T: msgStop})
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	expired := false
	for _, p := range cs.procs {
		if !expired {
			select {
			case <-p.done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// kill kills every client at once.
func (cs *clientSet) kill() {
	for _, p := range cs.procs {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}
