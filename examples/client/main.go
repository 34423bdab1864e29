// Command client is the smallest client-only raftlock program: it takes a
// lock on a running cluster, prints its sequencer and lets it go. It
// imports only the Go client (transport/client) and the session library
// (session), so it links none of the server: lean_test.go pins that.
//
//	go run ./examples/client -addr 127.0.0.1:7001 -lock app/leader
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/client"
)

func main() {
	addrs := flag.String("addr", "127.0.0.1:7001", "comma-separated HTTP addresses of the cluster's nodes")
	name := flag.String("lock", "app/leader", "lock to take")
	timeout := flag.Duration("timeout", 30*time.Second, "how long to try")
	flag.Parse()
	if err := run(*addrs, *name, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(addrs, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := client.NewClient(strings.Split(addrs, ","))
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	s, err := session.Open(ctx, c)
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	defer s.Close(context.WithoutCancel(ctx))
	l, err := s.Lock(ctx, name)
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	fmt.Println(l.Sequencer())
	return l.Unlock(ctx)
}
