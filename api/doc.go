// Package api is raftlock's contract: the requests and results of the
// session and lock calls, the Backend interface that carries them (the HTTP
// client, an embedded replica, the leader itself), the error codes with
// their sentinel errors, the limits and defaults, and the one set of input
// validators that every layer calls. It has no behaviour of its own: the
// client is package session, the leader package node, the wire package
// transport.
package api
