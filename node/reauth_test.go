package node

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/api/apitest"
)

// watchWaiting reports whether a goroutine of this process is inside
// Node.WatchLock: the watch was authorised and waits.
func watchWaiting() error {
	buf := make([]byte, 1<<20)
	if strings.Contains(string(buf[:runtime.Stack(buf, true)]), "node.(*Node).WatchLock(") {
		return nil
	}
	return fmt.Errorf("no watch waiting")
}

// TestDeletedTokensWatchGetsNothingWrittenAfterItsDeletion pins issue 27
// item 9: a watch (blocking read) authorised before its token is deleted
// does not receive the lock's state written after the deletion; it is
// answered unauthenticated.
func TestDeletedTokensWatchGetsNothingWrittenAfterItsDeletion(t *testing.T) {
	var logs apitest.LogBuffer
	c := newACLCluster(t, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, admin := c.bootstrapACL(t, ctx)
	tok, err := admin.CreateToken(ctx, api.TokenRequest{Name: "watcher", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	ld, _ := c.leader()
	st, err := ld.BackendWithToken(tok.Secret).LockState(ctx, "w/x")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		st  api.LockState
		err error
	}
	res := make(chan answer, 1)
	go func() {
		s, err := ld.BackendWithToken(tok.Secret).WatchLock(ctx, "w/x", st.Index, 20*time.Second)
		res <- answer{s, err}
	}()
	eventually(t, 10*time.Second, "the watch waits", watchWaiting)
	if err := admin.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	info, err := admin.OpenSession(ctx, api.OpenRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Acquire(ctx, api.AcquireRequest{Name: "w/x", Session: info.ID, Holder: "written-after"}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-res:
		if a.err == nil || codeOf(a.err) != api.CodeUnauthenticated {
			t.Fatalf("the deleted token's watch answered %+v, %v; want unauthenticated", a.st, a.err)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not end")
	}
}
