// Package client is the Go client of raftlock's HTTP/JSON API (docs/API.md):
// Client implements api.Backend over the wire, with the one retry policy,
// leader following, the member sync, and the cluster, ACL, membership and
// snapshot calls of the CLI. It imports only api, sequencer and the
// standard library, so that a client-only program (package session on top
// of it) links none of the server: no Raft, no storage, no Prometheus, no
// status page. TLS configuration for it comes from transport/tlsconf.
package client
