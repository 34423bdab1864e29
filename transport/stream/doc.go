// Package stream is raftlock's binary protocol beside HTTP/JSON: the same
// API (routes, JSON bodies, headers, status codes, error codes) in frames,
// so that a client process carries all its requests to a node over one TCP
// connection, and both ends write every frame queued at once in one write.
//
// The server (Server) turns each request frame into an *http.Request and
// runs it through the API's own http.Handler (transport/httpapi), so
// authentication, ACLs, limits, errors and forwarding to the leader are
// HTTP's by construction. The client side (Transport) is an
// http.RoundTripper: the Go client above it is unchanged.
//
// # Format
//
// A connection opens with the client's preface, the 4 bytes "RLSP" and a
// version byte (api.StreamVersion, 1); the server sends nothing back unless
// it refuses (a goaway frame). Then frames flow both ways, each a 9-byte
// header and a payload, integers big-endian:
//
//	length  uint32  payload bytes
//	type    uint8   1 request, 2 answer, 3 cancel, 4 goaway
//	stream  uint32  the request's id, chosen by the client (0: the connection)
//
// A string is a uvarint length and its bytes; a header list is a uvarint
// count and that many pairs of strings (name, value). Payloads:
//
//	request  method, target (path and query), headers, body (the rest)
//	answer   status uint16, headers, body (the rest)
//	cancel   empty: the client gave up on the stream; its handler's
//	         context is cancelled and no answer follows
//	goaway   an API error body ({"error":{"code":...,"message":...}});
//	         the sender closes the connection after it
//
// Limits (api/limits.go): a request frame of at most api.MaxStreamFrameBytes
// with at most api.MaxStreamHeaderBytes of method, target and headers; an
// answer frame of at most api.MaxStreamAnswerBytes; api.MaxStreamsInFlight
// requests in flight per connection (one more is answered 429
// resource_exhausted). An oversized or malformed frame, or a wrong preface,
// gets a goaway (too_large or invalid_argument) and the connection is
// closed.
package stream
