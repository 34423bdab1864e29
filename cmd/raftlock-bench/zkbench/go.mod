module github.com/raftlock/raftlock/cmd/raftlock-bench/zkbench

go 1.26.8

// The shared driver (internal/bench) lives in the main module's tree; this
// nested module uses the checked-out copy, so the main module never
// depends on ZooKeeper's client.
replace github.com/raftlock/raftlock => ../../..

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/raftlock/raftlock v0.0.0-00010101000000-000000000000
)
