package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/node/backupfile"
	"github.com/raftlock/raftlock/transport/client"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// snapshotFake is a Fake that serves backups: Snapshot writes
// backup, Restore records what it was given.
type snapshotFake struct {
	*httpapitest.Fake
	backup   []byte
	restored []byte
	minToken uint64
}

func (f *snapshotFake) Snapshot(_ context.Context, w io.Writer) (api.SnapshotInfo, error) {
	_, err := w.Write(f.backup)
	return api.SnapshotInfo{Index: 7, Checksum: "abc"}, err
}

func (f *snapshotFake) Restore(_ context.Context, data []byte, minToken uint64) (api.RestoreInfo, error) {
	f.restored, f.minToken = data, minToken
	return api.RestoreInfo{Floor: 99, Sessions: 1}, nil
}

func (f *snapshotFake) PeerRestore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error) {
	return f.Restore(ctx, data, minToken)
}

// TestSnapshotRoutesCarryTheFileAndItsFloor pins the wire of the backup
// routes: GET /v1/snapshot answers the file as an octet-stream with its
// index and checksum headers, which Client.Snapshot reads; POST
// /v1/snapshot/restore hands the body and min_token to the service and
// answers its RestoreInfo; a bad min_token is invalid_argument; a
// service without backups answers not_found; the peer-only route is not
// served on the client port.
func TestSnapshotRoutesCarryTheFileAndItsFloor(t *testing.T) {
	// A file whole in form (magic, checksum): the server checks that much
	// of an upload before it hands it over.
	var file bytes.Buffer
	if _, err := backupfile.Encode(&file, backupfile.Header{}, bytes.Repeat([]byte("b"), 100<<10)); err != nil {
		t.Fatal(err)
	}
	f := &snapshotFake{Fake: httpapitest.New("n1"), backup: file.Bytes()}
	ts := httptest.NewServer(NewServer(f))
	defer ts.Close()
	cl, err := client.NewClient([]string{ts.Listener.Addr().String()}, client.WithRetryBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var buf bytes.Buffer
	info, err := cl.Snapshot(ctx, &buf)
	if err != nil || !bytes.Equal(buf.Bytes(), f.backup) || info.Index != 7 || info.Checksum != "abc" {
		t.Fatalf("Snapshot = %+v, %v (%d bytes)", info, err, buf.Len())
	}
	ri, err := cl.Restore(ctx, f.backup, 42)
	if err != nil || ri.Floor != 99 || f.minToken != 42 || !bytes.Equal(f.restored, f.backup) {
		t.Fatalf("Restore = %+v, %v (min token %d)", ri, err, f.minToken)
	}
	resp, err := http.Post(ts.URL+"/v1/snapshot/restore?min_token=-1", "application/octet-stream", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("min_token=-1: HTTP %d, want 400", resp.StatusCode)
	}
	resp, err = http.Post(ts.URL+"/v1/internal/restore", "application/octet-stream", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("peer-only restore on the client port: HTTP %d, want 404", resp.StatusCode)
	}
	plain := newTestServer(t, httpapitest.New("n1"))
	pc, err := client.NewClient([]string{plain.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Snapshot(ctx, io.Discard); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("Snapshot of a service without backups: %v, want not_found", err)
	}
}
