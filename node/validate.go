package node

import (
	"time"

	"github.com/raftlock/raftlock/api"
)

// Bounds of the node's duration settings. Like the session limits, they are
// part of the documented contract (docs/OPERATIONS.md, "Limits and defaults"); raftlockd
// checks its flags against them with the same validators.
const (
	// MaxFailoverGrace bounds Config.FailoverGrace. A grace longer than the
	// longest lease (api.MaxTTL) would keep the locks of clients that
	// died during a failover unavailable for longer than any lease they
	// could have asked for.
	MaxFailoverGrace = 5 * time.Minute
	// MinRaftTimeout and MaxRaftTimeout bound each Raft timeout
	// (HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout).
	// hashicorp/raft refuses anything below 5 ms; beyond a minute a dead
	// leader would go unnoticed for longer than most leases.
	MinRaftTimeout = 5 * time.Millisecond
	MaxRaftTimeout = time.Minute
	// MinExpiryInterval and MaxExpiryInterval bound Config.ExpiryInterval:
	// the expiry ticker runs at least once per shortest lease.
	MinExpiryInterval = time.Millisecond
	MaxExpiryInterval = api.MinTTL
)

func invalid(format string, args ...any) error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

// CheckFailoverGrace checks a failover grace as it will be applied:
// [0, MaxFailoverGrace], zero meaning no extra grace (a new leader restarts
// every deadline at now+ttl). what names the setting in the error (a flag
// or a Config field). A Config's zero (the default) and NoFailoverGrace are
// resolved before this check.
func CheckFailoverGrace(what string, d time.Duration) error {
	return api.CheckDuration(what, d, 0, MaxFailoverGrace)
}

// Timeout is one Raft timeout and the name its errors give it: a flag such
// as "--raft-heartbeat-timeout" or a Config field such as
// "HeartbeatTimeout".
type Timeout struct {
	Name  string
	Value time.Duration
}

// CheckRaftTimeouts checks the three Raft timeouts as hashicorp/raft's
// ValidateConfig would at start, but with invalid_argument errors that
// name the settings: each in [MinRaftTimeout, MaxRaftTimeout], the leader
// lease no longer than the heartbeat timeout, and the election timeout no
// shorter than the heartbeat timeout.
func CheckRaftTimeouts(heartbeat, election, leaderLease Timeout) error {
	for _, t := range []Timeout{heartbeat, election, leaderLease} {
		if err := api.CheckDuration(t.Name, t.Value, MinRaftTimeout, MaxRaftTimeout); err != nil {
			return err
		}
	}
	if leaderLease.Value > heartbeat.Value {
		return invalid("%s %v must not exceed %s %v", leaderLease.Name, leaderLease.Value, heartbeat.Name, heartbeat.Value)
	}
	if election.Value < heartbeat.Value {
		return invalid("%s %v must be at least %s %v", election.Name, election.Value, heartbeat.Name, heartbeat.Value)
	}
	return nil
}
