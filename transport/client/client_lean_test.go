package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// TestClientFollowsARedirectInFrontOfTheNode pins that the client's direct
// path to its transport still follows a redirect, as http.Client does: a
// front that answers 307 to the node's address (body resent) is passed.
func TestClientFollowsARedirectInFrontOfTheNode(t *testing.T) {
	node := newTestServer(t, httpapitest.New("n1"))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, node.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	c := newTestClient(t, hostOf(front))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.OpenSession(ctx, api.OpenRequest{Name: "s", TTL: time.Minute})
	if err != nil {
		t.Fatalf("open session through a redirecting front: %v", err)
	}
	g, err := c.Acquire(ctx, api.AcquireRequest{Name: "l", Session: info.ID, Holder: "h"})
	if err != nil || g.Name != "l" || g.Token == 0 {
		t.Fatalf("acquire through a redirecting front: %+v, %v", g, err)
	}
}
