package transport

import (
	"encoding/json"
	"net/http"
)

// The Client's side of the lean request path (see http_lean.go): request
// bodies and the hot answers in hand-written JSON, constant headers
// without allocations.

// encodeRequest encodes a request body: json.Marshal's bytes.
func encodeRequest(v any) ([]byte, error) {
	if a, ok := v.(jsonAppender); ok {
		return a.appendJSON(make([]byte, 0, 256))
	}
	return json.Marshal(v)
}

// decodeFastAnswer decodes an answer of the plain subset into out,
// reporting false when out has no fast decoder or data is outside the
// subset (the caller then decodes it with encoding/json).
func decodeFastAnswer(data []byte, out any) bool {
	d, ok := out.(fastDecoder)
	return ok && d.decodeFast(data)
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
