package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport/tlsconf"
)

// stepDownTimeout bounds the leadership transfer of a leader that stops.
const stepDownTimeout = 3 * time.Second

// membershipOptions are the flags of joining a cluster.
type membershipOptions struct {
	// join lists members' HTTP addresses (--join); joinToken is the admin
	// token to ask with (--join-token, default $RAFTLOCK_ACL_TOKEN);
	// nonvoter joins as a non-voter.
	join, joinToken string
	nonvoter        bool
}

func addMembershipFlags(fs *flag.FlagSet, o *membershipOptions) {
	fs.StringVar(&o.join, "join", "", "join an existing cluster through these members' HTTP addresses (ADDR[,ADDR]), with an empty data dir; in place of --peers")
	fs.StringVar(&o.joinToken, "join-token", os.Getenv("RAFTLOCK_ACL_TOKEN"), "admin ACL token that --join asks with (default $RAFTLOCK_ACL_TOKEN)")
	fs.BoolVar(&o.nonvoter, "nonvoter", false, "with --join: join as a non-voter (replicates, never votes or leads)")
}

// check refuses contradictory membership flags.
func (m membershipOptions) check(peers string, dev bool) error {
	switch {
	case m.join != "" && dev:
		return errors.New("--join is for a real node, not --dev")
	case m.join != "" && peers != "":
		return errors.New("--join and --peers exclude each other: --peers bootstraps a new cluster, --join joins one")
	case m.nonvoter && m.join == "":
		return errors.New("--nonvoter needs --join")
	}
	return nil
}

// joinConfig is the node's JoinConfig for --join (nil without it): the
// addresses, the token, and for a TLS cluster the node's own certificate
// as the client's, the addresses taken as https.
func joinConfig(o options) (*node.JoinConfig, error) {
	if o.members.join == "" {
		return nil, nil
	}
	j := &node.JoinConfig{Token: o.members.joinToken, NonVoter: o.members.nonvoter}
	for _, a := range strings.Split(o.members.join, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if o.tls() && !strings.Contains(a, "://") {
			a = "https://" + a
		}
		j.Addrs = append(j.Addrs, a)
	}
	if len(j.Addrs) == 0 {
		return nil, errors.New("--join: no address")
	}
	if o.tls() {
		cfg, err := tlsconf.ClientConfig(o.tlsCA, o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, err
		}
		j.TLS = cfg
	}
	return j, nil
}

// stepDown hands leadership over if this node leads, before it stops, so
// that a rolling restart costs clients a transfer, not an election.
func (s *server) stepDown(logger hclog.Logger) {
	if !s.transferOnStop || !s.node.IsLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepDownTimeout)
	defer cancel()
	start := time.Now()
	to, err := s.node.StepDown(ctx)
	if err != nil {
		logger.Warn("leadership transfer before stopping failed; stopping anyway", "error", err)
		return
	}
	logger.Info("handed leadership over before stopping", "to", to, "took", time.Since(start).Round(time.Millisecond))
}
