package client

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/raftlock/raftlock/api"
)

// The Client's side of the lean request path (see http_lean.go): request
// bodies and the hot answers in hand-written JSON, constant headers
// without allocations.

// encodeRequest encodes a request body: json.Marshal's bytes.
func encodeRequest(v any) ([]byte, error) {
	if a, ok := v.(api.JSONAppender); ok {
		return a.AppendJSON(make([]byte, 0, 256))
	}
	return json.Marshal(v)
}

// decodeFastAnswer decodes an answer of the plain subset into out,
// reporting false when out has no fast decoder or data is outside the
// subset (the caller then decodes it with encoding/json).
func decodeFastAnswer(data []byte, out any) bool {
	d, ok := out.(api.FastDecoder)
	return ok && d.DecodeFast(data)
}

var hdrAcceptJSON = []string{"application/json"}

// setRequestHeaders sets the headers of a request: Accept, the bearer
// token if any, and the body's Content-Type if it has one.
func setRequestHeaders(h http.Header, token string, body bool) {
	h["Accept"] = hdrAcceptJSON
	if token != "" {
		h["Authorization"] = []string{"Bearer " + token}
	}
	if body {
		h["Content-Type"] = hdrJSON
	}
}

// send sends one request. With an http.Client that adds nothing to a
// request (no cookie jar, no timeout: the one NewClient builds, or one
// given so) it goes straight to the client's transport, which is what the
// http.Client would do minus its per-request copies of the headers for
// redirects (the API answers none), with the same errors; a redirect is
// then sent again through the http.Client. Otherwise through the
// http.Client.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	if c.hc.Jar != nil || c.hc.Timeout != 0 {
		return c.hc.Do(req)
	}
	rt := c.hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		// Not the API's answer (something in front of the node, e.g. one
		// that redirects to https): send it again through the
		// http.Client, which follows redirects.
		resp.Body.Close()
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		return c.hc.Do(again)
	}
	return resp, nil
}

// isHealthAnswer reports whether a GET /v1/health answer that is not 2xx
// is a node's unhealthy verdict (503 with a HealthInfo body) rather than
// an error of something in between.
func isHealthAnswer(status int, data []byte) bool {
	if status != http.StatusServiceUnavailable {
		return false
	}
	var probe struct {
		OK *bool `json:"ok"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.OK != nil
}

// hdrJSON is the constant Content-Type value of a JSON request body.
var hdrJSON = []string{"application/json"}
