package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// An address where another HTTP server listens (an HTML 404, or a 200
// that is not JSON) is "not a raftlock node", not an internal error with
// the page's HTML.
func TestForeignHTTPServerIsNotARaftlockNode(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"404 page", http.StatusNotFound, "<!DOCTYPE HTML><html><body>Not Found</body></html>"},
		{"200 page", http.StatusOK, "<html>welcome</html>"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		}))
		cl, err := NewClient([]string{srv.Listener.Addr().String()}, WithRequestTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cl.Cluster(ctx)
		cancel()
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "is not a raftlock node") || strings.Contains(err.Error(), "DOCTYPE") || api.CodeOf(err) != api.CodeUnreachable {
			t.Errorf("%s: %v (code %s), want unreachable: ... is not a raftlock node", c.name, err, api.CodeOf(err))
		}
	}
}
