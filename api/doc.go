// Package api is raftlock's contract: the requests and results of the
// session and lock calls, the Backend interface that carries them (the HTTP
// client, an embedded replica, the leader itself), the error codes with
// their sentinel errors, the limits and defaults, and the one set of input
// validators that every layer calls; and the cluster's vocabulary: the
// JSON wire types of the HTTP API (wire.go), members, leadership, health,
// overview, snapshot and restore info. It has no behaviour of its own: the
// client is package session, the leader package node, the HTTP server
// transport/httpapi and the Go HTTP client transport/client.
package api
