// Package raftnet is a node's peer port: one TCP listener (mutual TLS
// with tlsconf.TLS) that carries Raft's RPCs (hashicorp/raft's
// NetworkTransport) and, sorted by a port mux on the first byte, the HTTP
// requests peers send each other: forwarded API calls, member records,
// the bootstrap probe and the replicas' digests. It also holds the calls a
// node makes on its peers' ports (PostMember, GetBootstrapState,
// GetDigests, TellDiverged), the bootstrap probe a node serves before its
// API (ServeBootstrapProbe), and the per-IP connection cap
// (LimitConnsPerIP). The full API on the peer port is served by
// transport/httpapi on RaftNet.Peers.
package raftnet
