// Package session is the Go client of raftlock: a Session keeps a lease
// alive on the cluster (keepalives, jeopardy, grace, expiry), takes locks
// (Lock, TryLock, RLock…), each a handle whose Lost channel closes before
// anyone else can be granted the lock, and runs elections (Campaign,
// Observe) and watches on top of them.
//
// A Session talks to the cluster through an api.Backend: client.Client
// for a cluster over the network, node.Node.Backend for an embedded
// replica. The contract they share (requests, results, error codes, limits,
// validators) is package api.
package session
