package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// TestStatusPageIsEmbeddedServedLocallyWithACSPAndNotOnThePeerPort pins
// how the page's files are served: from the binary, with their types and
// a same-origin CSP, /ui redirected to /ui/, anything else under /ui/ a
// JSON 404, other methods 405, and not at all on the peer port.
func TestStatusPageIsEmbeddedServedLocallyWithACSPAndNotOnThePeerPort(t *testing.T) {
	f := httpapitest.New("n1")
	srv := httptest.NewServer(NewServer(f))
	defer srv.Close()
	peer := httptest.NewServer(NewServer(f, peerRoutes))
	defer peer.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	get := func(c *http.Client, method, url string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>raftlock status</title>"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/v1/overview?index="},
		{"/ui/style.css", "text/css; charset=utf-8", "@media (max-width: 760px)"},
	} {
		resp, body := get(noRedirect, "GET", srv.URL+tc.path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v; want 200 %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"),
				tc.contains, strings.Contains(body, tc.contains), tc.ctype)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "connect-src 'self'") || strings.Contains(csp, "http") {
			t.Errorf("GET %s: CSP %q, want same-origin only", tc.path, csp)
		}
	}
	if resp, _ := get(noRedirect, "GET", srv.URL+"/ui"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d to %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/ui/nope.js", "/ui/a/app.js", "/ui/../v1/health"} {
		if resp, body := get(noRedirect, "GET", srv.URL+p); resp.StatusCode != 404 || !strings.Contains(body, `"not_found"`) {
			t.Errorf("GET %s: %d %s, want 404 not_found", p, resp.StatusCode, body)
		}
	}
	if resp, body := get(noRedirect, "HEAD", srv.URL+"/ui/app.js"); resp.StatusCode != 200 || body != "" {
		t.Errorf("HEAD /ui/app.js: %d with %d bytes, want 200 and no body", resp.StatusCode, len(body))
	}
	if resp, body := get(noRedirect, "POST", srv.URL+"/ui/"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" ||
		!strings.Contains(body, `"method_not_allowed"`) {
		t.Errorf("POST /ui/: %d %q %s, want 405 method_not_allowed, Allow: GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	if resp, _ := get(noRedirect, "GET", peer.URL+"/ui/"); resp.StatusCode != 404 {
		t.Errorf("GET /ui/ on the peer port: %d, want 404", resp.StatusCode)
	}
}
