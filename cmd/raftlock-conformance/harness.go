package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// worker is the client under test: a subprocess speaking the line
// protocol. Its stderr is kept, to show when a case fails.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	stdout *lockedBuffer // every line it wrote, to look for secrets in

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan message
	events  []event
	changed chan struct{} // closed and replaced when an event arrives
	exited  chan struct{}
	err     error
}

// event is an unsolicited line of the worker, with its time: the worker's
// At, or the suite's time of reading the line if that is earlier or At is
// absent.
type event struct {
	message
	at time.Time
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startWorker starts argv as a worker, with env added to its environment.
func startWorker(argv []string, env []string) (*worker, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), env...)
	w := &worker{cmd: cmd, stderr: &lockedBuffer{}, stdout: &lockedBuffer{}, waiting: map[int]chan message{},
		changed: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.stdin = in
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %v: %w", argv, err)
	}
	go w.read(out)
	return w, nil
}

// read dispatches the worker's lines: replies to their callers, events
// to the list.
func (w *worker) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		now := time.Now()
		w.stdout.Write(append(sc.Bytes(), '\n'))
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintf(w.stderr, "[suite] worker wrote a line that is not JSON: %q\n", sc.Text())
			continue
		}
		w.mu.Lock()
		if m.Event != "" {
			at := now
			if m.At > 0 {
				if t := fromUnixSeconds(m.At); t.Before(now) {
					at = t
				}
			}
			w.events = append(w.events, event{message: m, at: at})
			close(w.changed)
			w.changed = make(chan struct{})
		} else if ch, ok := w.waiting[m.ID]; ok {
			delete(w.waiting, m.ID)
			ch <- m
		}
		w.mu.Unlock()
	}
	err := w.cmd.Wait()
	w.mu.Lock()
	w.err = fmt.Errorf("worker exited (%v); its stderr:\n%s", err, w.stderr.String())
	w.mu.Unlock()
	close(w.exited)
}

// call sends request m and waits for its reply, or ctx.
func (w *worker) call(ctx context.Context, m message) (message, error) {
	ch := make(chan message, 1)
	w.mu.Lock()
	w.nextID++
	m.ID = w.nextID
	w.waiting[m.ID] = ch
	w.mu.Unlock()
	line, err := json.Marshal(m)
	if err != nil {
		return message{}, err
	}
	if _, err := w.stdin.Write(append(line, '\n')); err != nil {
		return message{}, fmt.Errorf("write to worker: %w", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-w.exited:
		return message{}, w.err
	case <-ctx.Done():
		return message{}, fmt.Errorf("%s: no reply: %w", m.Op, ctx.Err())
	}
}

// callAsync sends request m in the background, for a request that waits
// (a blocked lock or campaign) while the case acts on the cluster; the
// function it returns waits for the reply, as call does.
func (w *worker) callAsync(ctx context.Context, m message) func() (message, error) {
	type reply struct {
		m   message
		err error
	}
	done := make(chan reply, 1)
	go func() {
		r, err := w.call(ctx, m)
		done <- reply{r, err}
	}()
	return func() (message, error) {
		r := <-done
		return r.m, r.err
	}
}

// do is call for a request that must succeed.
func (w *worker) do(ctx context.Context, m message) (message, error) {
	r, err := w.call(ctx, m)
	if err != nil {
		return r, err
	}
	if r.OK == nil || !*r.OK {
		return r, fmt.Errorf("%s: %s: %s", m.Op, r.Code, r.Message)
	}
	return r, nil
}

// open is do for an "open" request, a case's setup: it is asked again,
// up to three times, when the cluster could not say whether it opened the
// session (unknown_outcome, no_leader: a leader change on a loaded
// machine). Opening a session is not idempotent, so a client reports
// that; a session opened twice leaves one to expire.
func (w *worker) open(ctx context.Context, m message) (message, error) {
	for attempt := 1; ; attempt++ {
		r, err := w.call(ctx, m)
		if err != nil {
			return r, err
		}
		if r.OK != nil && *r.OK {
			return r, nil
		}
		if attempt == 3 || (r.Code != "unknown_outcome" && r.Code != "no_leader") {
			return r, fmt.Errorf("open: %s: %s", r.Code, r.Message)
		}
	}
}

// await waits for the first event since index from for which match is
// true, and returns it with its index.
func (w *worker) await(ctx context.Context, from int, match func(event) bool) (event, int, error) {
	for {
		w.mu.Lock()
		for i := from; i < len(w.events); i++ {
			if match(w.events[i]) {
				e := w.events[i]
				w.mu.Unlock()
				return e, i, nil
			}
		}
		from = len(w.events)
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-w.exited:
			return event{}, 0, w.err
		case <-ctx.Done():
			return event{}, 0, ctx.Err()
		}
	}
}

// seen reports whether an event since index from matches, without
// waiting.
func (w *worker) seen(from int, match func(event) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := from; i < len(w.events); i++ {
		if match(w.events[i]) {
			return true
		}
	}
	return false
}

// mark returns the index of the next event, for await.
func (w *worker) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

// stop asks the worker to quit, and kills it if it does not in time.
func (w *worker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.call(ctx, message{Op: "quit"})
	w.stdin.Close()
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		w.cmd.Process.Kill()
		<-w.exited
	}
}

// isLost matches the lost event of lock ref.
func isLost(ref string) func(event) bool {
	return func(e event) bool { return e.Event == "lost" && e.Lock == ref }
}

// isState matches a state event of session ref in state st.
func isState(ref, st string) func(event) bool {
	return func(e event) bool { return e.Event == "state" && e.Session == ref && e.State == st }
}
