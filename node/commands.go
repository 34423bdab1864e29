package node

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
)

// commandsWait bounds how long a request that needs a command version
// waits for the member records to say that every member reads it
// (needCommands): a new cluster's members, and a member that has just
// restarted on a newer build, record what they read within a
// registration round (registerLoop), well within it.
const commandsWait = 2 * time.Second

// commandsPoll is how often needCommands looks at the member records
// again while it waits.
const commandsPoll = 20 * time.Millisecond

// commandVersion is the format this leader writes its next entry in: the
// binary format (fsm.VersionBinary) once the member record of every server
// in the Raft configuration says that its build reads it, checksummed JSON
// (fsm.VersionJSON) before, so that a rolling upgrade from a build without
// the binary format never sends a replica an entry it cannot decode (it
// would halt on it). A member without a record, or an old build's record,
// keeps JSON. Once the cluster writes binary, a build from before it
// cannot rejoin: upgrades go forward only.
func (n *Node) commandVersion() byte {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return fsm.VersionJSON
	}
	servers := cf.Configuration().Servers
	var buf [8]string
	ids := buf[:0]
	for _, s := range servers {
		ids = append(ids, string(s.ID))
	}
	return n.fsm.CommandsRead(ids)
}

// needLockOptions is needCommands for what only command version 5
// carries (permits, a hold limit, revocations, release requests).
func (n *Node) needLockOptions(ctx context.Context, what string) error {
	return n.needCommands(ctx, fsm.VersionLockOptions, what)
}

// needCommands returns nil once the member records say that every member
// of the Raft configuration reads command version v (commandVersion), so
// that what (a request that only version v carries) may be proposed. A
// leader may not know yet: a new cluster's members, and a member just
// restarted on a newer build, record what they read shortly after they
// start. So it waits for the records up to commandsWait (less if ctx
// ends first), and then refuses what (commandsRefusal). A node that does
// not lead answers no_leader at once.
func (n *Node) needCommands(ctx context.Context, v byte, what string) error {
	if n.commandVersion() >= v {
		return nil
	}
	deadline := time.NewTimer(commandsWait)
	defer deadline.Stop()
	poll := time.NewTicker(commandsPoll)
	defer poll.Stop()
	done := n.leadershipDone()
	for {
		select {
		case <-done:
			return n.noLeader()
		case <-ctx.Done():
			return n.commandsRefusal(v, what)
		case <-deadline.C:
			return n.commandsRefusal(v, what)
		case <-poll.C:
		}
		if n.commandVersion() >= v {
			return nil
		}
	}
}

// commandsRefusal is the answer to what, which needs command version v,
// while the member records say that some member may read less:
//   - no_leader (retryable) while a member has recorded no version (no
//     record yet, or one without a version: a member added by an
//     operator that has not registered itself yet, or a build from
//     before the binary format): the leader does not know what it reads;
//   - invalid_argument (not retryable) when a member's record says that
//     its build reads less: an operator must upgrade it first.
func (n *Node) commandsRefusal(v byte, what string) error {
	conf, err := n.configuration()
	if err != nil {
		return err
	}
	records := make(map[string]fsm.Member)
	for _, m := range n.fsm.Members() {
		records[m.ID] = m
	}
	low, reads := "", v
	for _, s := range conf.Servers {
		m := records[string(s.ID)]
		if m.Commands == 0 {
			return api.Errorf(api.CodeNoLeader,
				"%s needs command version %d: node %s leads, but member %s has not recorded which command versions it reads (it registers once it runs); retry",
				what, v, n.cfg.ID, s.ID)
		}
		if m.Commands < reads {
			low, reads = m.ID, m.Commands
		}
	}
	if low == "" {
		// The records changed since the last look: the next try passes.
		return api.Errorf(api.CodeNoLeader, "%s: the member records changed while it waited; retry", what)
	}
	return errNeedsCommands(what, v, low, reads)
}

// errNeedsCommands is the answer to what, which needs command version v,
// while member reads less (its member record says so).
func errNeedsCommands(what string, v byte, member string, reads byte) error {
	return &api.Error{Code: api.CodeInvalidArgument, Message: fmt.Sprintf(
		"%s: every member must run a build that reads command version %d, and member %s reads %d: upgrade it first",
		what, v, member, reads)}
}
