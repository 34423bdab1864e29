package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/raftlock/raftlock/api"
)

// The lean parts of the request path: pooled buffers for bodies and
// answers, headers set without per-call allocations where the value is
// constant, one route lookup per request, and a cached histogram series.
// What is answered is unchanged (byte for byte).

// decodeFastBody decodes a request body of the plain subset (see
// http_fastjson.go) into dst, reporting false when dst has no fast decoder
// or data is outside the subset.
func decodeFastBody(data []byte, dst any) bool {
	switch d := dst.(type) {
	case api.FastDecoder:
		return d.DecodeFast(data)
	case *struct{}:
		return api.DecodeFastEmpty(data)
	}
	return false
}

// encodeAnswer appends v's JSON encoding, json.Marshal's bytes, to dst.
func encodeAnswer(dst []byte, v any) ([]byte, error) {
	if a, ok := v.(api.JSONAppender); ok {
		return a.AppendJSON(dst)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, data...), nil
}

// The constant header values, shared: net/http only reads a header's
// values (its answer writes a copy of the map), and an append to a value
// slice whose length is its capacity copies it.
var (
	hdrJSON    = []string{"application/json"}
	hdrNosniff = []string{"nosniff"}
)

// setJSONHeaders sets the headers of a JSON answer of n bytes.
func setJSONHeaders(h http.Header, n int) {
	h["Content-Type"] = hdrJSON
	h["X-Content-Type-Options"] = hdrNosniff
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// setLeaderHeaders stamps the answer with the leadership view li, its
// values in one allocation.
func setLeaderHeaders(h http.Header, li api.LeaderInfo) {
	vals := [3]string{li.ID, li.HTTPAddr, strconv.FormatUint(li.Term, 10)}
	s := vals[:]
	h[api.HeaderLeader] = s[0:1:1]
	if li.HTTPAddr != "" {
		h[api.HeaderLeaderAddr] = s[1:2:2]
	}
	h[api.HeaderTerm] = s[2:3:3]
	if li.Members != "" {
		h[api.HeaderMembers] = []string{li.Members}
	}
}

// serveRoute serves r with h, the handler mux.Handler found for pattern.
// A pattern with wildcards goes through the ServeMux again, which sets
// the path values its handler reads (r.PathValue); any other is called
// directly, so that the common request is routed once.
func (s *Server) serveRoute(w http.ResponseWriter, r *http.Request, h http.Handler, pattern string) {
	if strings.ContainsRune(pattern, '{') {
		s.mux.ServeHTTP(w, r)
		return
	}
	r.Pattern = pattern
	h.ServeHTTP(w, r)
}

// routeObserver caches a route's series of the request histogram for
// status 200 (created on its first observation, as WithLabelValues
// does).
type routeObserver struct {
	ok atomic.Pointer[prometheus.Observer]
}

// observer returns the histogram series of route and status.
func (s *Server) observer(route string, status int) prometheus.Observer {
	ro := s.routeObs[route]
	if status != http.StatusOK || ro == nil {
		return s.durations.WithLabelValues(route, strconv.Itoa(status))
	}
	if o := ro.ok.Load(); o != nil {
		return *o
	}
	o := s.durations.WithLabelValues(route, "200")
	ro.ok.Store(&o)
	return o
}
