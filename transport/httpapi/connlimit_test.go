package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
	"github.com/raftlock/raftlock/node/backupfile"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// TestReadTimeoutCutsStalledRequestsNotWaitingOnes pins the read deadline
// of issue 27 item 7 with a 300 ms ReadTimeout: a request whose body
// stops arriving has its connection closed, while an acquire and a
// blocking query that wait three times as long after reading their
// request are answered (the deadline is lifted once the body is read),
// and a restore upload that takes longer but keeps arriving is taken in.
func TestReadTimeoutCutsStalledRequestsNotWaitingOnes(t *testing.T) {
	const read = 300 * time.Millisecond
	var file bytes.Buffer
	if _, err := backupfile.Encode(&file, backupfile.Header{}, bytes.Repeat([]byte("b"), 64<<10)); err != nil {
		t.Fatal(err)
	}
	fs := &snapshotFake{Fake: httpapitest.New("n1")}
	f := fs.Fake
	f.SetHook(func(ctx context.Context, c apitest.Call) error {
		if c.Method != "Acquire" && c.Method != "WatchLock" {
			return nil
		}
		select { // the fake's stand-in for a wait: not a synchronisation
		case <-time.After(3 * read):
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s: request context ended while waiting: %w", c.Method, ctx.Err())
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewServer(fs)}
	configureServer(srv, time.Minute, read)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newTestClient(t, ln.Addr().String())
	info, err := cl.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "a", Session: info.ID, Holder: "h"}); err != nil {
		t.Fatalf("an acquire that waits after its body was read: %v", err)
	}
	if _, err := cl.WatchLock(ctx, "a", 1, time.Second); err != nil {
		t.Fatalf("a blocking query: %v", err)
	}
	// A restore upload that takes longer than the read timeout but keeps
	// arriving is taken in whole.
	pr, pw := io.Pipe()
	go func() {
		data := file.Bytes()
		for len(data) > 0 {
			n := min(len(data), 8<<10)
			if _, err := pw.Write(data[:n]); err != nil {
				return
			}
			data = data[n:]
			time.Sleep(read / 3) // a slow client, not a synchronisation
		}
		pw.Close()
	}()
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/snapshot/restore", "application/octet-stream", pr)
	if err != nil {
		t.Fatalf("a slow restore upload: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(fs.restored, file.Bytes()) {
		t.Fatalf("a slow restore upload: HTTP %d, %d of %d bytes restored", resp.StatusCode, len(fs.restored), file.Len())
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"ttl\":"); err != nil {
		t.Fatal(err)
	}
	// The server answers the cut request (or closes at once); either way
	// the connection ends, long before this test's own deadline.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a request whose body stopped arriving kept its connection open")
	}
}
