// Package fsm is raftlock's replicated state machine: sessions, locks,
// their holders, FIFO waiters, grant histories and lock-delays, ACL
// tokens (the SHA-256 of each secret, never the secret) and the ACL
// bootstrap, cluster member addresses, and the restore hold.
//
// Apply is deterministic: it reads no clock, draws no random numbers and
// does no I/O. Time and ids arrive inside commands, stamped by the leader
// before it proposes them. Business outcomes (busy, not holder, ...) are
// returned as typed Results. A log entry that cannot be decoded or fails
// its checksum halts the state machine: that entry and every one after it
// answer StatusCorrupt, unapplied, and Snapshot refuses (FSM.Halted); a
// corrupt log stops the replica, it never diverges it nor crashes it.
//
// Each command type is registered once in the command table
// (commands.go): its name, its binary fields and the function that
// applies it. Each entity has its own file; DESIGN.md says why the state
// machine is shaped this way.
package fsm
