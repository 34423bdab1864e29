// Package httpapi is raftlock's HTTP server: the JSON API of docs/API.md
// on a node's client port (NewServer), the same API plus the peer-only
// routes on its peer port (ServePeers, over transport/raftnet), and the
// plain health and metrics listener (NewMetricsServer). It serves one
// Service, which it declares and receives at construction, so that a
// service missing a method does not compile (node.Node implements it;
// httpapitest has the fakes). It forwards to the leader, authenticates
// with ACLs on, maps error codes to HTTP statuses (api.StatusOf), and
// serves the status page (package ui) at /ui/.
package httpapi
