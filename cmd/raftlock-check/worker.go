package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
)

// A client process of the checker may drive the workload through a
// conformance worker (docs/CONFORMANCE.md), the client under test then
// being the worker's, in any language: the workload's sessions and locks
// become the protocol's open, lock, unlock and close, the worker's state
// and lost events become the client's msgState and Lost(), and the
// worker's HTTP requests go through a recording proxy (recProxy), which
// records them in the history as the recorder records the Go client's.
// The workload's own reads and the naive waiter stay the Go client's.

// workerMaxWait is the wait of a lock the workload waits for without a
// deadline (the protocol has no endless wait): longer than any run's
// longest hold.
const workerMaxWait = 10 * time.Minute

// workerQuitWait bounds the wait for the worker to exit after quit.
const workerQuitWait = 10 * time.Second

// wmsg is one line of the worker protocol, in either direction.
type wmsg struct {
	ID        uint64   `json:"id,omitempty"`
	Op        string   `json:"op,omitempty"`
	Event     string   `json:"event,omitempty"`
	OK        *bool    `json:"ok,omitempty"`
	Code      string   `json:"code,omitempty"`
	Message   string   `json:"message,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
	Session   string   `json:"session,omitempty"`
	Lock      string   `json:"lock,omitempty"`
	Name      string   `json:"name,omitempty"`
	TTL       float64  `json:"ttl,omitempty"`
	LockDelay *float64 `json:"lock_delay,omitempty"`
	Grace     float64  `json:"grace,omitempty"`
	Wait      float64  `json:"wait,omitempty"`
	State     string   `json:"state,omitempty"`
	Sequencer string   `json:"sequencer,omitempty"`
	Token     uint64   `json:"token,omitempty"`
	Holder    string   `json:"holder,omitempty"`
	Client    string   `json:"client,omitempty"`
	At        float64  `json:"at,omitempty"`
}

// workerClient runs one worker process and speaks its protocol.
type workerClient struct {
	cfg   clientConfig
	link  *link
	proxy *recProxy
	cmd   *exec.Cmd
	done  chan struct{} // closed when the worker's output ended

	wmu sync.Mutex
	enc *json.Encoder

	mu       sync.Mutex
	next     uint64
	pending  map[uint64]chan wmsg
	sessions map[string]*workerSession
	locks    map[string]*workerLock
	refs     int
}

// startWorker starts command (the worker), connected to the proxy's
// addresses (plain HTTP), its stderr going to stderr.
func startWorker(cfg clientConfig, l *link, proxy *recProxy, command []string, stderr io.Writer) (*workerClient, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = stderr
	// It dies with the client process; it stays in the client's process
	// group, so that a SIGSTOP of the client stops it too.
	cmd.SysProcAttr = workerAttr()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %q: %w", command, err)
	}
	wc := &workerClient{cfg: cfg, link: l, proxy: proxy, cmd: cmd, done: make(chan struct{}), enc: json.NewEncoder(in),
		pending: map[uint64]chan wmsg{}, sessions: map[string]*workerSession{}, locks: map[string]*workerLock{}}
	go wc.readLoop(out)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hello, err := wc.request(ctx, wmsg{Op: "hello"})
	if err == nil {
		_, err = wc.request(ctx, wmsg{Op: "connect", Endpoints: proxy.addrs})
	}
	if err != nil {
		wc.kill()
		return nil, fmt.Errorf("worker %q: %w", command, err)
	}
	l.send(message{T: msgLog, At: monoNow(), Err: "worker: " + hello.Client})
	return wc, nil
}

// readLoop dispatches the worker's replies and events until its output
// ends.
func (wc *workerClient) readLoop(r io.Reader) {
	defer close(wc.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m wmsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			wc.link.send(message{T: msgLog, At: monoNow(), Err: fmt.Sprintf("worker: bad line: %v", err)})
			continue
		}
		switch {
		case m.Event == "state":
			wc.mu.Lock()
			s := wc.sessions[m.Session]
			wc.mu.Unlock()
			if s != nil {
				s.setState(m.State, wc.at(m.At))
			}
		case m.Event == "lost":
			wc.mu.Lock()
			l := wc.locks[m.Lock]
			wc.mu.Unlock()
			if l != nil {
				l.lose(wc.at(m.At))
			}
		case m.Event != "":
		default:
			wc.mu.Lock()
			ch := wc.pending[m.ID]
			delete(wc.pending, m.ID)
			wc.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
}

// at converts an event's time (Unix seconds, 0: none) to monoNow's clock,
// never later than now.
func (wc *workerClient) at(unix float64) int64 {
	now := monoNow()
	if unix <= 0 {
		return now
	}
	ago := time.Since(time.Unix(0, int64(math.Round(unix*1e9))))
	if ago < 0 {
		return now
	}
	return now - int64(ago)
}

// request sends m and waits for its reply until ctx ends; a reply that
// is not ok is an *api.Error of its code.
func (wc *workerClient) request(ctx context.Context, m wmsg) (wmsg, error) {
	ch := make(chan wmsg, 1)
	wc.mu.Lock()
	wc.next++
	m.ID = wc.next
	wc.pending[m.ID] = ch
	wc.mu.Unlock()
	wc.wmu.Lock()
	err := wc.enc.Encode(m)
	wc.wmu.Unlock()
	if err != nil {
		return wmsg{}, fmt.Errorf("worker gone: %w", err)
	}
	select {
	case r := <-ch:
		if r.OK == nil || !*r.OK {
			return r, api.Errorf(api.Code(r.Code), "worker: %s", r.Message)
		}
		return r, nil
	case <-wc.done:
		return wmsg{}, errors.New("worker exited")
	case <-ctx.Done():
		wc.mu.Lock()
		delete(wc.pending, m.ID)
		wc.mu.Unlock()
		return wmsg{}, ctx.Err()
	}
}

// stop asks the worker to quit (it closes its sessions) and kills it if it
// does not exit in time.
func (wc *workerClient) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), workerQuitWait)
	defer cancel()
	_, _ = wc.request(ctx, wmsg{Op: "quit"})
	select {
	case <-wc.done:
	case <-ctx.Done():
	}
	wc.kill()
}

func (wc *workerClient) kill() {
	_ = wc.cmd.Process.Signal(os.Kill)
	_ = wc.cmd.Wait()
}

func (wc *workerClient) ref(prefix string) string {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	wc.refs++
	return fmt.Sprintf("%s%d", prefix, wc.refs)
}

// open opens a session through the worker; its id is the one the proxy
// saw the cluster give (one open at a time per client).
func (wc *workerClient) open(ctx context.Context, name string) (clientSession, error) {
	s := &workerSession{wc: wc, ref: wc.ref("s"), state: "safe"}
	wc.mu.Lock()
	wc.sessions[s.ref] = s
	wc.mu.Unlock()
	m := wmsg{Op: "open", Session: s.ref, TTL: wc.cfg.TTL.Seconds(), Name: name}
	if wc.cfg.LockDelay > 0 {
		ld := wc.cfg.LockDelay.Seconds()
		m.LockDelay = &ld
	}
	if wc.cfg.Grace > 0 {
		m.Grace = wc.cfg.Grace.Seconds()
	}
	if _, err := wc.request(ctx, m); err != nil {
		wc.forget(s.ref)
		return nil, err
	}
	s.mu.Lock()
	s.id = wc.proxy.lastOpened()
	s.mu.Unlock()
	if s.id == "" {
		wc.forget(s.ref)
		return nil, errors.New("worker opened a session the proxy did not see")
	}
	return s, nil
}

func (wc *workerClient) forget(ref string) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	delete(wc.sessions, ref)
}

// workerSession is a clientSession of a worker.
type workerSession struct {
	wc  *workerClient
	ref string

	mu    sync.Mutex
	id    string
	state string
}

func (s *workerSession) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// setState takes a state event: the client's msgState.
func (s *workerSession) setState(st string, at int64) {
	s.mu.Lock()
	s.state = st
	id := s.id
	s.mu.Unlock()
	s.wc.link.send(message{T: msgState, At: at, Session: id, Result: st})
}

func (s *workerSession) Safe() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == "safe"
}

func (s *workerSession) Over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == "expired" || s.state == "closed"
}

func (s *workerSession) TryLock(ctx context.Context, name string) (clientLock, error) {
	return s.lock(ctx, name, 0)
}

// Lock waits until ctx's deadline (workerMaxWait without one).
func (s *workerSession) Lock(ctx context.Context, name string) (clientLock, error) {
	wait := workerMaxWait
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Millisecond)
	}
	return s.lock(ctx, name, wait)
}

func (s *workerSession) lock(ctx context.Context, name string, wait time.Duration) (clientLock, error) {
	l := &workerLock{wc: s.wc, ref: s.wc.ref("l"), name: name, lost: make(chan struct{})}
	s.wc.mu.Lock()
	s.wc.locks[l.ref] = l
	s.wc.mu.Unlock()
	type answer struct {
		r   wmsg
		err error
	}
	ans := make(chan answer, 1)
	go func() {
		r, err := s.wc.request(context.WithoutCancel(ctx), wmsg{Op: "lock", Session: s.ref, Lock: l.ref, Name: name, Wait: wait.Seconds()})
		ans <- answer{r, err}
	}()
	var a answer
	select {
	case a = <-ans:
	case <-ctx.Done():
		// Given up on (the run ends): a grant that comes later is
		// released.
		go func() {
			if a := <-ans; a.err == nil {
				l.token, l.holder = a.r.Token, a.r.Holder
				uctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
				defer cancel()
				_ = l.Unlock(uctx)
			}
		}()
		return nil, ctx.Err()
	}
	if a.err != nil {
		s.wc.mu.Lock()
		delete(s.wc.locks, l.ref)
		s.wc.mu.Unlock()
		return nil, a.err
	}
	l.token, l.holder, l.seq = a.r.Token, a.r.Holder, a.r.Sequencer
	return l, nil
}

func (s *workerSession) Close(ctx context.Context) error {
	_, err := s.wc.request(ctx, wmsg{Op: "close", Session: s.ref})
	s.mu.Lock()
	if s.state != "expired" {
		s.state = "closed"
	}
	s.mu.Unlock()
	s.wc.forget(s.ref)
	return err
}

// workerLock is a clientLock of a worker.
type workerLock struct {
	wc          *workerClient
	ref, name   string
	token       uint64
	holder, seq string
	once        sync.Once
	lost        chan struct{}
	lostAtNs    int64
}

func (l *workerLock) Name() string          { return l.name }
func (l *workerLock) Token() uint64         { return l.token }
func (l *workerLock) Holder() string        { return l.holder }
func (l *workerLock) Seq() string           { return l.seq }
func (l *workerLock) Lost() <-chan struct{} { return l.lost }

// lostAt is when the worker said the lock was lost (monoNow's clock).
func (l *workerLock) lostAt() int64 { return l.lostAtNs }

func (l *workerLock) lose(at int64) {
	l.once.Do(func() {
		l.lostAtNs = at
		close(l.lost)
	})
}

func (l *workerLock) Unlock(ctx context.Context) error {
	defer l.wc.proxy.unlock(l.holder)()
	_, err := l.wc.request(ctx, wmsg{Op: "unlock", Lock: l.ref})
	l.wc.mu.Lock()
	delete(l.wc.locks, l.ref)
	l.wc.mu.Unlock()
	return err
}
