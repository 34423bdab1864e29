package stream

import (
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// Advertise wraps the HTTP API's handler h so that every answer names
// the node's stream port (api.HeaderStreamPort): a Transport that gets
// such an answer sends its next requests to the node over the stream
// protocol, at the host it reached the node at.
func Advertise(h http.Handler, port string) http.Handler {
	v := []string{port}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()[api.HeaderStreamPort] = v
		h.ServeHTTP(w, r)
	})
}
