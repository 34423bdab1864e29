package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

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

// bufPool holds the buffers answers are read into (as the server's
// transport/httpapi does for bodies: the client imports no server code).
// A buffer is used only while its request or answer is handled: decoders
// copy what they keep, and an io.Writer does not retain what it is given.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuf is the largest buffer put back into bufPool: a rare large
// body does not keep its memory.
const maxPooledBuf = 16 << 10

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// readAll is io.ReadAll into buf (appending): the same data and errors,
// without the growth from 512 bytes when buf has room.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf)-len(buf) < 512 {
		buf = append(buf, make([]byte, 512)...)[:len(buf)]
	}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
	}
}

// hdrJSON is the constant Content-Type value of a JSON request body.
var hdrJSON = []string{"application/json"}
