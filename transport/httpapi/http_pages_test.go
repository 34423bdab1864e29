package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// A service that only lists every lock at once is paged from that listing
// (httpapitest.LocksPage, which the server once did itself): pages of at most limit locks in name order, each lock once; the
// client's LocksPage exposes a page, Locks pages through them all.
func TestLocksPagesOfAServiceWithoutPager(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	ctx := testCtx(t)
	s, err := c.OpenSession(ctx, api.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("p/%d", i)
		want = append(want, name)
		if _, err := c.Acquire(ctx, api.AcquireRequest{Name: name, Session: s.ID, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	q := api.LocksQuery{Prefix: "p/", Limit: 3}
	for pages := 1; ; pages++ {
		p, err := c.LocksPage(ctx, q)
		if err != nil || len(p.Locks) > 3 || pages > 3 {
			t.Fatalf("page %d: %d locks, %v", pages, len(p.Locks), err)
		}
		for _, l := range p.Locks {
			got = append(got, l.Name)
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pages listed %v, want %v", got, want)
	}
	all, err := c.Locks(ctx, "p/")
	if err != nil || len(all) != 7 {
		t.Fatalf("Locks: %d, %v", len(all), err)
	}
	if r := rawDo(t, ts.URL, "GET", "/v1/locks?limit=10001", nil); r.status != http.StatusBadRequest || r.errCode() != "invalid_argument" {
		t.Fatalf("limit over the maximum: %d %s", r.status, r.body)
	}
}

// resource_exhausted travels as 429 and comes back to the client as the
// same code, not retried.
func TestResourceExhaustedIs429AndNotRetried(t *testing.T) {
	f := httpapitest.New("n1")
	ts := newTestServer(t, f)
	c := newTestClient(t, hostOf(ts))
	f.Fail("OpenSession", api.Errorf(api.CodeResourceExhausted, "the cluster's limit of 1 open sessions is reached"))
	if _, err := c.OpenSession(testCtx(t), api.OpenRequest{}); !errors.Is(err, api.ErrResourceExhausted) {
		t.Fatalf("open past the limit: %v", err)
	}
	f.Fail("OpenSession", api.Errorf(api.CodeResourceExhausted, "the cluster's limit of 1 open sessions is reached"))
	if r := rawDo(t, ts.URL, "POST", "/v1/sessions", nil); r.status != http.StatusTooManyRequests || r.errCode() != "resource_exhausted" {
		t.Fatalf("raw: %d %s", r.status, r.body)
	}
}
