package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/raftlock/raftlock/cmd/internal/crashfs"
)

// A power loss (the proxy killed -9 mid-stream, then every write its disk
// had not fsynced thrown away: crashfs) loses no acknowledged raise:
// after a restart on what the disk kept, every lock refuses the token
// below the highest one the proxy had acknowledged for it. The stream is
// long enough for the log to be compacted into the snapshot meanwhile.
func TestFenceProxyKeepsEveryAcknowledgedRaiseThroughAPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs a fence-proxy process on a FUSE disk")
	}
	_, cli := binaries(t)
	disk, err := crashfs.MountT(t)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(disk.Dir(), "fence.json")
	_, url := newRecordingBackend(t)
	args := []string{"--any-lock", "--cluster-check=false"}
	fp := startFenceProxy(t, cli, url, state, args...)

	const writers, names, enough = 8, 25, 4000
	var mu sync.Mutex
	acked := map[string]int{} // lock -> highest token acknowledged
	total := 0
	reached := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{}
			for i := 1; ; i++ {
				name := fmt.Sprintf("w%d/%d", w, i%names)
				req, _ := http.NewRequest(http.MethodPut, fp.base+"/x", nil)
				req.Header.Set("Raftlock-Sequencer", fmt.Sprintf("rl1:x:%d:%s", i, name))
				resp, err := hc.Do(req)
				if err != nil {
					return // the power went
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("%s token %d: HTTP %d", name, i, resp.StatusCode)
					return
				}
				mu.Lock()
				acked[name] = i
				if total++; total == enough {
					close(reached)
				}
				mu.Unlock()
			}
		}()
	}
	<-reached
	fp.kill()
	wg.Wait()
	if err := disk.Crash(); err != nil {
		t.Fatal(err)
	}
	fp = startFenceProxy(t, cli, url, state, args...)
	hc := &http.Client{}
	for name, tok := range acked {
		if tok < 2 {
			continue
		}
		st, code := putThrough(t, hc, fp.base, fmt.Sprintf("rl1:x:%d:%s", tok-1, name), "below")
		if st != http.StatusConflict || code != "stale_sequencer" {
			t.Errorf("%s: token %d after the power loss: HTTP %d %s, want 409 stale_sequencer (token %d was acknowledged)", name, tok-1, st, code, tok)
		}
	}
	t.Logf("%d raises acknowledged over %d locks before the power loss", total, len(acked))
}
