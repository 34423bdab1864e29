// Command embedded is an application that embeds raftlock: three instances
// of it form a Raft cluster among themselves (no external lock service)
// and elect one of them leader with the session.Campaign recipe. The
// leader does the application's singleton work, fenced by its sequencer;
// every instance prints each new leader it observes.
//
//	embedded --id n1 --raft 127.0.0.1:7201 --data /tmp/emb/n1 \
//	         --peers n1=127.0.0.1:7201,n2=127.0.0.1:7202,n3=127.0.0.1:7203
//
// (and n2, n3 likewise). Kill the leader: another instance takes over once
// the dead one's session lease and lock-delay have run out.
//
// With --tls-cert, --tls-key and --tls-ca (node certificates and the CA,
// e.g. from "raftlock tls init DIR --node n1=127.0.0.1 ...") the replicas
// talk to each other over mutual TLS only: a peer must hold a node
// certificate signed by the CA.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/node/nodehttp"
	"github.com/raftlock/raftlock/session"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

const election = "app/leader"

// Stopping is bounded, quorum or not: resigning and closing the session
// need the cluster (without a quorum they can never succeed, and the
// session then simply expires after its TTL), so together they get
// sessionStopTimeout at most; stopping the replica needs no quorum and
// gets nodeStopTimeout at most. A SIGTERM'd instance exits within their
// sum.
const (
	sessionStopTimeout = 3 * time.Second
	nodeStopTimeout    = 5 * time.Second
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

func run() error {
	var id, raftAddr, dataDir, peerList, tlsCert, tlsKey, tlsCA string
	var ttl, lockDelay time.Duration
	flag.StringVar(&id, "id", "", "this instance's id (n1)")
	flag.StringVar(&raftAddr, "raft", "", "host:port of this instance's peer port (Raft, and the other instances' calls)")
	flag.StringVar(&dataDir, "data", "", "data directory")
	flag.StringVar(&peerList, "peers", "", "all instances: id=raft-host:port,...")
	flag.DurationVar(&ttl, "ttl", 5*time.Second, "session lease")
	flag.DurationVar(&lockDelay, "lock-delay", 2*time.Second, "lock-delay after a dead leader's session expires")
	flag.StringVar(&tlsCert, "tls-cert", "", "this instance's node certificate (PEM): mutual TLS between the instances (with --tls-key, --tls-ca)")
	flag.StringVar(&tlsKey, "tls-key", "", "the key of --tls-cert (PEM)")
	flag.StringVar(&tlsCA, "tls-ca", "", "the CA certificate (PEM) that signed every instance's certificate")
	flag.Parse()
	if id == "" || raftAddr == "" || dataDir == "" || peerList == "" {
		return errors.New("--id, --raft, --data and --peers are required")
	}
	var tlsID *tlsconf.TLS
	if tlsCert != "" || tlsKey != "" || tlsCA != "" {
		if tlsCert == "" || tlsKey == "" || tlsCA == "" {
			return errors.New("TLS needs all of --tls-cert, --tls-key and --tls-ca")
		}
		var err error
		if tlsID, err = tlsconf.LoadTLS(tlsCert, tlsKey, tlsCA); err != nil {
			return err
		}
	}
	var peers []node.Peer
	for _, p := range strings.Split(peerList, ",") {
		pid, addr, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("--peers: %q is not id=host:port", p)
		}
		peers = append(peers, node.Peer{ID: pid, RaftAddr: addr})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: os.Stderr})

	// 1. The embedded replica: it serves its peers by itself, on its
	// peer port (mutual TLS with tlsID). With ProbePeers an instance with
	// an empty data dir bootstraps only once every peer answered that it
	// is new too, and never beside a cluster that exists already (a wiped
	// instance restarted with these flags refuses and names the fix).
	n, err := node.Start(ctx, node.Config{ID: id, DataDir: dataDir, RaftBind: raftAddr, Peers: peers, Logger: logger,
		TLS: tlsID, ProbePeers: true, Wire: nodehttp.Wire{}})
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), nodeStopTimeout)
		defer cancel()
		if err := n.Shutdown(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "embedded:", err)
		}
	}()
	// stopCtx is the deadline of the calls made while stopping (resign,
	// close the session): sessionStopTimeout after the first of them.
	var stopBy time.Time
	stopCtx := func() (context.Context, context.CancelFunc) {
		if stopBy.IsZero() {
			stopBy = time.Now().Add(sessionStopTimeout)
		}
		return context.WithDeadline(context.Background(), stopBy)
	}

	// 2. A session through the embedded Backend: in-process on the leader
	// replica, forwarded to it from the others.
	s, err := session.Open(ctx, n.Backend(), session.TTL(ttl), session.LockDelay(lockDelay), session.Name(id))
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the cluster answered
		}
		return fmt.Errorf("open session: %w", err)
	}
	defer func() {
		cctx, cancel := stopCtx()
		defer cancel()
		_ = s.Close(cctx)
	}()

	// 3. Everyone observes the election.
	leaders, err := s.Observe(ctx, election)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	go func() {
		for l := range leaders {
			fmt.Printf("%s observes leader %s (token %d)\n", id, l.Value, l.Token())
		}
	}()

	// 4. Campaign; lead while the leadership holds.
	for {
		lead, err := s.Campaign(ctx, election, id+"@"+raftAddr)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fmt.Printf("%s elected: %s\n", id, lead.Sequencer())
		select {
		case <-ctx.Done():
			rctx, cancel := stopCtx()
			defer cancel()
			if err := lead.Resign(rctx); err != nil {
				fmt.Printf("%s could not resign (%v); its leadership ends with its session\n", id, err)
				return nil
			}
			fmt.Printf("%s resigned\n", id)
			return nil
		case <-lead.Lost():
			// The session expired (e.g. this process was paused): stop
			// leader work at once; campaign again with a new session.
			fmt.Printf("%s lost the leadership\n", id)
			if s.State() == session.Expired {
				if s, err = session.Open(ctx, n.Backend(), session.TTL(ttl), session.LockDelay(lockDelay), session.Name(id)); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("reopen session: %w", err)
				}
			}
		}
	}
}
