// Command zkbench runs raftlock-bench's scenarios against a ZooKeeper
// ensemble (3.5 or later) with ZooKeeper's standard lock recipe through
// github.com/go-zookeeper/zk (an ephemeral sequential node per acquire,
// a watch on the predecessor only) and prints the same lines, so that
// bench-vs-peers.sh can compare it with etcd and raftlock. It is a
// separate module so that raftlock never depends on a ZooKeeper client.
//
//	uncontended (a)  --clients N, each its own connection (session) and
//	                 lock node
//	contended   (b)  --clients N on one lock node: handoffs/s
//	sessions    (c)  --sessions S connections, each a session kept alive by
//	                 the library's pings (the server needs maxClientCnxns=0)
//	failover    (d)  the load of (a); the leader (found with the srvr
//	                 four-letter word; --pids zN=PID with N the server's
//	                 myid) is killed --rounds times; --restart-cmd restarts it
//
// The servers must allow the four-letter words srvr and conf
// (4lw.commands.whitelist). --route leader (the default) gives the
// clients of (a), (b) and (c) only the leader's address; (d) always uses
// every address. The "term" of a grant is the epoch of the zxid that last
// changed the lock node's children when the grant was seen.
package main

import (
	"context"
	"os"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// command is zkbench's command line. --route leader gives the clients of
// scenarios (a)-(c) only the leader's address.
var command = bench.Command{
	Name:        "zkbench",
	DefaultAddr: "127.0.0.1:2181",
	LeaderRoute: "leader",
	OtherRoute:  "all",
	RouteUsage:  "leader: clients of scenarios a-c use only the leader's address; all: every address (the client picks one at random)",
	Check:       checkFiles,
	Open: func(ctx context.Context, c bench.Config) (bench.System, error) {
		return newSystem(ctx, c.Addrs, c.TTL, c.Leader && c.Scenario != bench.Failover)
	},
}
