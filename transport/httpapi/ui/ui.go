// Package ui is the status page of a raftlock node (GET /ui/): static
// assets embedded in the binary (no CDN, no build step), which read the
// cluster through the node's own API (GET /v1/overview, a blocking query)
// from the browser.
package ui

import (
	"embed"
	"net/http"
	"strconv"
	"strings"
)

//go:embed index.html app.js style.css
var assets embed.FS

// Prefix is the path the page is served under.
const Prefix = "/ui/"

// contentTypes are the types of the assets, by file name suffix.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// csp lets the page load its own assets and call its own origin only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Is reports whether path belongs to the page: /ui or anything under
// /ui/.
func Is(path string) bool { return path == "/ui" || strings.HasPrefix(path, Prefix) }

// Serve answers a request for the page: GET or HEAD /ui/ (index.html),
// /ui/app.js, /ui/style.css; /ui redirects to /ui/. It reports false,
// writing nothing, for any other path or method, which the caller answers
// as it answers unknown routes.
func Serve(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return true
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		return false
	}
	if name == "" {
		name = "index.html"
	}
	if strings.Contains(name, "/") {
		return false
	}
	body, err := assets.ReadFile(name)
	if err != nil {
		return false
	}
	ct := ""
	for suffix, t := range contentTypes {
		if strings.HasSuffix(name, suffix) {
			ct = t
		}
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return true
}
