package node

import (
	"github.com/raftlock/raftlock/fsm"
)

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
