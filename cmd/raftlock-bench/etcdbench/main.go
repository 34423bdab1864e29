// Command etcdbench runs raftlock-bench's scenarios against an etcd cluster
// with etcd's own lock recipe (go.etcd.io/etcd/client/v3/concurrency:
// NewSession, NewMutex, Lock, Unlock) and prints the same lines, so that
// bench-vs-peers.sh can compare them. It is a separate module so that
// raftlock never depends on etcd; the client (v3.5) speaks to etcd 3.4 and
// 3.5 servers.
//
//	uncontended (a)  --clients N, each its own etcd client, session and mutex
//	contended   (b)  --clients N on one mutex: handoffs/s
//	sessions    (c)  --sessions S leases kept alive by one client's lease
//	                 keepalive stream (the library's own multiplexing)
//	failover    (d)  the load of (a); the leader (--pids member-name=PID) is
//	                 killed --rounds times; --restart-cmd restarts it
//
// --route leader (the default) gives the clients of (a), (b) and (c) only
// the leader's endpoint, as raftlock-bench starts its clients at the
// leader; (d) always uses every endpoint.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// command is etcdbench's command line. --route leader gives the clients
// of scenarios (a)-(c) only the leader's endpoint.
var command = bench.Command{
	Name:        "etcdbench",
	DefaultAddr: "127.0.0.1:2379",
	LeaderRoute: "leader",
	OtherRoute:  "all",
	RouteUsage:  "leader: clients of scenarios a-c use only the leader's endpoint; all: every endpoint (round robin)",
	Check: func(o *bench.Options) error {
		if o.TTL%1e9 != 0 {
			return fmt.Errorf("--ttl %v: etcd leases take whole seconds", o.TTL)
		}
		return nil
	},
	Open: func(ctx context.Context, c bench.Config) (bench.System, error) {
		return newSystem(ctx, c.Addrs, c.TTL, c.Leader && c.Scenario != bench.Failover)
	},
}
