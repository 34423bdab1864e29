// Package node is one raftlock replica: it wires hashicorp/raft (its log
// in raft-wal or bbolt, the stable store in bbolt, file snapshots), the
// lock state machine and
// leader-only reads. The leader's state of one leadership (the lease
// table, the timers of lock-delays and waits, the waiting acquires, the
// keepalives' shared confirmations) lives in a leaderTerm (term.go),
// created when leadership starts and dropped when it ends. Its methods are
// the in-process API that the HTTP server and embedding applications use;
// they implement api.Backend and httpapi.Service.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/raftnet"
	"github.com/raftlock/raftlock/transport/tlsconf"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/raftlock/raftlock/fsm"
)

// Peer is one member of the initial cluster.
type Peer struct {
	ID       string
	RaftAddr string
}

// Defaults of Config.
const (
	DefaultFailoverGrace      = 5 * time.Second
	DefaultExpiryInterval     = 50 * time.Millisecond
	DefaultMaxExpiriesPerTick = 256
	DefaultApplyTimeout       = 10 * time.Second

	// DefaultHeartbeatTimeout is how long a follower goes without hearing
	// from the leader before it stands for election (Raft randomises it
	// between 1x and 2x). With the leader sending heartbeats every tenth of
	// it, 500 ms tolerates pauses of several hundred milliseconds on a
	// loaded machine while a killed leader is replaced in about a second.
	DefaultHeartbeatTimeout = 500 * time.Millisecond
	// DefaultElectionTimeout bounds a candidate's election.
	DefaultElectionTimeout = 500 * time.Millisecond
	// DefaultLeaderLeaseTimeout is how long a leader that hears from no
	// quorum keeps leading before it steps down. It is not a read lease:
	// reads still call VerifyLeader.
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
)

// NoFailoverGrace as Config.FailoverGrace asks for no extra grace: a new
// leader restarts every deadline at now+ttl (a zero FailoverGrace takes
// DefaultFailoverGrace). Like api.NoLockDelay it is negative, a value no
// real grace can take.
const NoFailoverGrace time.Duration = -1

// logCacheSize is how many recent log entries the leader keeps in memory
// for replication.
const logCacheSize = 1024

// Config configures a Node. ID, DataDir and RaftBind (or Transport) are
// required.
type Config struct {
	// ID names the node in the cluster (e.g. "n1").
	ID string
	// DataDir holds raft.db (stable store; the log store too with
	// LogStoreBoltDB), wal/ (the log store with LogStoreWAL), the
	// log-store file that records which, and snapshots/.
	DataDir string
	// LogStore is the Raft log store: LogStoreWAL or LogStoreBoltDB, ""
	// for the data dir's own (wal for a new one). A data dir keeps the
	// store it was created with: New refuses another (MigrateLogStore
	// moves it).
	LogStore string
	// RaftBind is the host:port the Raft transport listens on; outgoing Raft
	// connections originate from its IP.
	RaftBind string
	// RaftAdvertise is the address peers dial (default: the listener's).
	RaftAdvertise string
	// HTTPAddr is this node's advertised HTTP API address, recorded in the
	// replicated member table so that followers can forward to the leader.
	HTTPAddr string
	// Peers is the bootstrap configuration, used only when DataDir holds no
	// Raft state. Every node of a new cluster is given the same list.
	Peers []Peer
	// Logger receives the node's and Raft's logs.
	Logger hclog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// FailoverGrace is added to every session's deadline when a new leader
	// takes over, so that live clients have time to find it: zero takes
	// DefaultFailoverGrace, NoFailoverGrace asks for none (deadlines restart
	// at now+ttl, still after every client's own lease end, which a client
	// counts from the send time of its last acknowledged keepalive), and
	// anything else must lie in [0, MaxFailoverGrace]; New refuses other
	// negative values.
	FailoverGrace time.Duration
	// ExpiryInterval is the period of the leader's expiry ticker (zero:
	// DefaultExpiryInterval; else in [MinExpiryInterval, MaxExpiryInterval]).
	ExpiryInterval time.Duration
	// MaxExpiriesPerTick rate-limits expiry proposals (zero:
	// DefaultMaxExpiriesPerTick; negative refused).
	MaxExpiriesPerTick int
	// Limits bound the replicated state (api.Limits; a zero field takes
	// its default, a negative one is refused). Every node of a cluster
	// should be given the same: the leader stamps its own into the
	// commands it proposes, and every replica applies those.
	Limits api.Limits
	// MaxPrefixWatchers and MaxPrefixWatchersPerToken cap the prefix
	// watches this node serves at once, in all and per ACL token (zero:
	// api.DefaultMaxPrefixWatchers, api.DefaultMaxPrefixWatchersPerToken;
	// negative refused). Node-local: a watch holds no replicated state.
	MaxPrefixWatchers, MaxPrefixWatchersPerToken int
	// MaxBlockingQueries and MaxBlockingQueriesPerToken cap the blocking
	// queries (watches of a lock or a prefix, blocking overviews) this
	// node serves, or forwards to the leader, at once, in all and per ACL
	// token (zero: api.DefaultMaxBlockingQueries,
	// api.DefaultMaxBlockingQueriesPerToken; negative refused).
	MaxBlockingQueries, MaxBlockingQueriesPerToken int
	// MaxAnswerBytesInFlight and MaxAnswerBytesInFlightPerToken bound the
	// answers of many locks (listing pages, prefix watch answers) this
	// node builds and sends at once, in bytes, in all and per ACL token,
	// each counted api.MaxAnswerBytes (zero:
	// api.DefaultMaxAnswerBytesInFlight,
	// api.DefaultMaxAnswerBytesInFlightPerToken; below one answer
	// refused). An answer waits up to api.AnswerBytesWait for room, then
	// is refused with resource_exhausted (answers.go).
	MaxAnswerBytesInFlight, MaxAnswerBytesInFlightPerToken int64
	// ACL turns access control on (raftlockd --acl; every node of a
	// cluster the same): every API call but GET /v1/health needs a token
	// (api.Principal in its context, put there by the HTTP layer from
	// Authorization: Bearer), whose rules allow it (api.Rules.Allows).
	ACL bool
	// MetricsOpen serves GET /metrics without a token even with ACL on
	// (raftlockd --metrics-open); otherwise it needs read on "".
	MetricsOpen bool
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout tune Raft
	// (zero: DefaultHeartbeatTimeout, DefaultElectionTimeout,
	// DefaultLeaderLeaseTimeout). Each must lie in [MinRaftTimeout,
	// MaxRaftTimeout], with LeaderLeaseTimeout <= HeartbeatTimeout <=
	// ElectionTimeout (CheckRaftTimeouts), as hashicorp/raft requires.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold is how many entries trigger a snapshot (default 8192).
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked (zero:
	// DefaultSnapshotInterval; else in [MinSnapshotInterval,
	// MaxSnapshotInterval]; Raft waits between 1x and 2x of it).
	SnapshotInterval time.Duration
	// DigestCheckInterval is how often the leader compares the replicas'
	// state digests (zero: DefaultDigestCheckInterval; agreement.go).
	DigestCheckInterval time.Duration
	// TrailingLogs is how many entries a snapshot leaves in the log, so
	// that a follower that lags by fewer catches up from the log instead
	// of a whole snapshot (zero: DefaultTrailingLogs).
	TrailingLogs uint64
	// TLS, if set, makes the peer port that New opens mutual TLS (as
	// raftlockd's --tls-cert, --tls-key and --tls-ca do, e.g. from
	// tlsconf.LoadTLS): Raft and the API for peers, in and out, with this
	// node's certificate, every peer's verified against the CA. A PeerPort
	// opened beforehand carries its own (raftnet.RaftTCPConfig.TLS).
	TLS *tlsconf.TLS
	// PeerPort is the node's peer port (Raft and the API for peers),
	// opened beforehand, e.g. to learn every node's address before writing
	// the peer list; nil: New opens one on RaftBind.
	PeerPort *raftnet.RaftNet
	// Wire is the HTTP layer the node serves its peer port's API with and
	// reaches the cluster's API through (the embedded Backend, Join):
	// nodehttp.Wire{} (package node/nodehttp). Required: node speaks no
	// HTTP itself.
	Wire Wire
	// RaftTransport overrides the Raft transport (in-memory unit tests); the
	// node then has no peer port, and followers forward to the leader's
	// HTTP address. Member records reach a leader only through its peer
	// port, so such a node records its own HTTP address only while it
	// leads (followers' addresses are missing from /v1/cluster).
	RaftTransport raft.Transport
	// ProbePeers makes a node with an empty data dir bootstrap from Peers
	// only once every other peer has answered, over its peer port, that it
	// is new too (Start waits for them as long as its ctx lasts), and never
	// when one belongs to a cluster already (raftlockd sets it; see
	// node/bootstrap.go).
	ProbePeers bool
	// Join, on an empty data dir, joins an existing cluster instead of
	// bootstrapping one (raftlockd --join); ignored on a node whose
	// configuration includes it.
	Join *JoinConfig
	// Restore, on a node with an empty data dir and ProbePeers, makes the
	// new cluster bootstrapped from Peers start from a backup (raftlockd
	// --restore): see RestoreSeed.
	Restore *RestoreSeed
	// MaxConnsPerIP caps the connections one source IP holds open on the
	// peer port (zero: api.DefaultMaxConnsPerIP; else in
	// [api.MinMaxConnsPerIP, api.MaxMaxConnsPerIP]); the IPs
	// of the cluster's members (its Raft configuration and Peers) are
	// exempt, so that clients cannot starve the peers (connlimit.go).
	// raftlockd --max-conns-per-ip sets it and the client port's cap.
	MaxConnsPerIP int
	// IdleTimeout closes the peer port's API connections idle that long
	// (zero: api.DefaultIdleTimeout; else in
	// [api.MinIdleTimeout, api.MaxIdleTimeout]); raftlockd
	// --http-idle-timeout sets it and the client port's.
	IdleTimeout time.Duration
	// Faults deliberately break guarantees, so that the fault checker can
	// show it catches a broken build. The default build has none (an
	// empty struct); build with -tags raftlock_faults to get them.
	Faults Faults

	// preBinary makes this node record no command version in its member
	// record, as a build from before the binary command format does:
	// tests play a rolling upgrade with it.
	preBinary bool
	// readsUpTo, when set, makes this node record that it reads command
	// versions up to it only, as an older build does: tests play a
	// cluster that does not read version 5 yet.
	readsUpTo byte
}

func (c *Config) fill() error {
	if c.ID == "" {
		return fmt.Errorf("node: config: empty ID")
	}
	if c.DataDir == "" {
		return fmt.Errorf("node: config: empty DataDir")
	}
	if c.RaftBind == "" && c.RaftTransport == nil && c.PeerPort == nil {
		return fmt.Errorf("node: config: empty RaftBind")
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	// From here on c.FailoverGrace is the grace the leader applies: zero
	// means none (the leader passes it to leaseTable.Reset as is).
	switch c.FailoverGrace {
	case 0:
		c.FailoverGrace = DefaultFailoverGrace
	case NoFailoverGrace:
		c.FailoverGrace = 0
	}
	if err := CheckFailoverGrace("FailoverGrace", c.FailoverGrace); err != nil {
		return fmt.Errorf("node: config: %w (NoFailoverGrace asks for none)", err)
	}
	if c.ExpiryInterval == 0 {
		c.ExpiryInterval = DefaultExpiryInterval
	}
	if err := api.CheckDuration("ExpiryInterval", c.ExpiryInterval, MinExpiryInterval, MaxExpiryInterval); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if c.MaxExpiriesPerTick == 0 {
		c.MaxExpiriesPerTick = DefaultMaxExpiriesPerTick
	}
	if err := c.Limits.Resolve(); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if err := c.checkConnLimits(); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if err := c.resolveAnswerBudget(); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if err := c.resolveWatchCaps(); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if c.MaxExpiriesPerTick < 0 {
		return fmt.Errorf("node: config: %w", invalid("MaxExpiriesPerTick %d must be positive", c.MaxExpiriesPerTick))
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
	}
	if err := CheckRaftTimeouts(Timeout{Name: "HeartbeatTimeout", Value: c.HeartbeatTimeout},
		Timeout{Name: "ElectionTimeout", Value: c.ElectionTimeout},
		Timeout{Name: "LeaderLeaseTimeout", Value: c.LeaderLeaseTimeout}); err != nil {
		return fmt.Errorf("node: config: %w", err)
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.DigestCheckInterval == 0 {
		c.DigestCheckInterval = DefaultDigestCheckInterval
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if err := c.checkSnapshotConfig(); err != nil {
		return err
	}
	if c.Wire == nil {
		return fmt.Errorf("node: config: no Wire: set Config.Wire (nodehttp.Wire{}, package node/nodehttp); node speaks no HTTP itself")
	}
	return nil
}

// Node is one replica of the lock service.
type Node struct {
	cfg  Config
	log  hclog.Logger
	raft *raft.Raft
	// raftLog is the logger hashicorp/raft writes through (raftlog.go).
	raftLog *raftLogger
	fsm     *fsm.FSM
	// store is raft.db: the stable store (term, vote), and the log store
	// with LogStoreBoltDB. logs is the log store (logstore.go), raft.db
	// or wal/ (logPath); walLog is it with LogStoreWAL, else nil.
	store   *raftboltdb.BoltStore
	logs    raft.LogStore
	walLog  io.Closer
	logPath string
	// watched sees the stores' writes (storewatch.go); watchedStable
	// (and the log cache over watchedLog) are what Raft is given.
	watched       *storeWatch
	watchedStable *watchedStable
	trans         raft.Transport
	// peer is the node's peer port (Raft and the API for peers) unless
	// Config.RaftTransport replaced it; peerSrv serves the API there.
	peer    *raftnet.RaftNet
	peerSrv io.Closer
	snap    snapshotState // backup and restore (snapshot.go)
	metrics *nodeMetrics  // GET /metrics (metrics.go)
	watch   *raftWatch    // leader changes, dead peers (raftwatch.go)
	lag     commitLag     // the leader's announced commit index (lag.go)
	// members caches the membership digest Leader reports on every
	// request (membersView in api.go).
	members atomic.Pointer[membersView]
	// failover shortens the heartbeat timeout when the leader's connection
	// is lost (failover.go).
	failover fastFailover

	// snaps is the snapshot store (snapstore.go).
	snaps *snapshotStore

	// ready is true while this node leads and has caught up (Barrier).
	ready atomic.Bool
	// term is the leader-only state of the current leadership (term.go),
	// from the moment Raft reports it until it ends; nil on a follower.
	// It is set and cleared under mu.
	term atomic.Pointer[leaderTerm]
	// noTerm is a closed channel: the leadershipDone of a follower.
	noTerm chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every lock change
	// prefixWatches counts the prefix watches served (watchprefix.go).
	prefixWatches watchCount
	// prefixChanges is the ring of recent lock changes the prefix
	// watches wake on (watchprefix.go).
	prefixChanges changeRing
	// blocking counts the blocking queries served or forwarded,
	// watchConfirm shares leadership confirmations among them, and
	// lockWakers wakes the watches of one lock (blocking.go).
	blocking watchCount
	// answers counts the bytes of the answers of many locks being built
	// and sent (answers.go).
	answers      answerBudget
	watchConfirm keepAliveConfirmer
	lockWakers   lockWakers
	steps        chan struct{} // blockingSteps slots

	events eventLog     // recent events for the status page (events.go)
	probes memberProbes // the leader's last look at the members (overview.go)

	// backend is the embedded-mode Backend, built once by Backend().
	backendOnce sync.Once
	backend     *embedded

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	// stopped is closed once Shutdown has stopped Raft and closed the
	// stores; stopErr is then its error. Both are set by the first
	// Shutdown.
	stopped chan struct{}
	stopErr error

	// fatal is closed when the node stopped itself for good (a corrupt
	// log entry: corrupt.go); fatalErr says why.
	fatal     chan struct{}
	fatalOnce sync.Once
	fatalErr  error
	// divergence is set when the leader found this replica's digest off
	// the majority's (agreement.go).
	divergence atomic.Pointer[error]

	// peerLn, if set, is the listener of the peer API (after the bootstrap
	// probe had the port).
	peerLn net.Listener
	// memberIPs are the members' IPs, exempt from the peer port's
	// per-IP connection cap (connlimit.go).
	memberIPs memberIPs
}

// New is Start without a deadline.
func New(cfg Config) (*Node, error) { return Start(context.Background(), cfg) }

// Start opens (or creates) the node's data directory, starts Raft and, on
// an empty data directory, bootstraps the cluster from cfg.Peers (after
// the probe, with cfg.ProbePeers) or joins one (cfg.Join). ctx bounds the
// probe and the join's check of the cluster.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	stages := &startStages{log: cfg.Logger.Named("node"), slowAfter: slowStartStage}
	defer stages.end()
	stages.begin("data dir")
	if err := mkdirDurable(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger.Named("node"),
		noTerm:  make(chan struct{}),
		changed: make(chan struct{}),
		steps:   make(chan struct{}, blockingSteps),
		stop:    make(chan struct{}),
		fatal:   make(chan struct{}),
	}
	close(n.noTerm)
	m, err := newNodeMetrics(n)
	if err != nil {
		return nil, err
	}
	n.metrics = m
	n.fsm = fsm.New(n.onEvent)

	stages.begin("open the stores")
	store, logs, err := n.openStores()
	if err != nil {
		return nil, err
	}
	stages.begin("open the snapshot store")
	snapDir := filepath.Join(cfg.DataDir, snapshotsDirName)
	snaps, err := openSnapshotStore(cfg.DataDir, cfg.Logger.Named("snapshots"), func(err error) { n.watched.note(storeSnapshots, snapDir, err) })
	if err != nil {
		n.closeRaftStores()
		return nil, fmt.Errorf("node: snapshot store: %w", err)
	}
	stages.begin("check the stores")
	if err := n.checkOpenStores(filepath.Join(cfg.DataDir, "raft.db"), n.logPath, n.logs, store, snaps.FileSnapshotStore); err != nil {
		n.closeRaftStores()
		return nil, fmt.Errorf("node: %w", err)
	}
	stages.begin("raft transport")
	trans := cfg.RaftTransport
	if trans == nil && cfg.PeerPort != nil {
		n.peer = cfg.PeerPort
		trans = cfg.PeerPort.Transport
	}
	if trans == nil {
		rn, err := raftnet.NewRaftTCPTransport(raftnet.RaftTCPConfig{
			// hashicorp/raft's transport logs through the same filter as
			// Raft itself (raftlog.go).
			BindAddr: cfg.RaftBind, Advertise: cfg.RaftAdvertise, Logger: newRaftLogger(cfg.Logger), TLS: cfg.TLS,
		})
		if err != nil {
			n.closeRaftStores()
			return nil, fmt.Errorf("node: %w", err)
		}
		n.peer = rn
		trans = rn.Transport
	}
	if nt, ok := trans.(*raft.NetworkTransport); ok {
		trans = newDrainingTransport(nt, &n.lag) // pipeline.go: hashicorp/raft#612 and #717
	}
	n.trans = trans
	if n.peer != nil {
		n.memberIPs.n = n
		n.peer.LimitConnsPerIP(cfg.MaxConnsPerIP, n.memberIPs.contains)
	}
	n.snaps = snaps

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	n.raftLog = newRaftLogger(cfg.Logger.Named("raft"))
	rc.Logger = n.raftLog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.MaxAppendEntries = 256
	// Group commit: the leader drains every Apply waiting on its channel
	// into one batch (one bbolt transaction, one AppendEntries).
	rc.BatchApplyCh = true

	stages.begin("look for raft state")
	hasState, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("node: inspect raft state: %w", err)
	}
	stages.begin(prepareStage(cfg, hasState))
	if err := n.prepareStart(ctx, rc, logs, snaps, hasState); err != nil {
		n.closeStores()
		return nil, err
	}
	stages.begin("raft start (restore the snapshot, replay the log)")
	r, err := raft.NewRaft(rc, n.fsm, logs, n.watchedStable, snaps, trans)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("node: start raft: %w", err)
	}
	n.raft = r
	n.memberIPs.raft.Store(r)
	if n.peer != nil {
		ln := n.peerLn
		if ln == nil {
			ln = n.peer.Peers
		}
		n.peerSrv = cfg.Wire.ServePeers(ln, n, cfg.Logger.Named("peer-api"), cfg.IdleTimeout)
	}
	if n.peer != nil {
		n.peer.OnInboundLost(n.onInboundLost)
	}
	n.watch = newRaftWatch(n.log, cfg.ID)
	n.wg.Add(4)
	go func() { defer n.wg.Done(); n.watch.run(r, n.stop) }()
	go func() { defer n.wg.Done(); n.watchDisk() }()
	go n.watchLeadership()
	go n.registerLoop()
	if hasState {
		n.warnPeersDiff()
	}
	if cfg.Join != nil && !n.inConfiguration(cfg.ID) {
		n.wg.Add(1)
		go n.joinLoop()
	}
	return n, nil
}

func (n *Node) closeStores() {
	if c, ok := n.trans.(interface{ Close() error }); ok && n.cfg.RaftTransport == nil {
		c.Close()
	}
	n.closeRaftStores()
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address peers reach this node's Raft transport at.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// DialPeer dials a peer's port (or HTTP address) from this node's own IP
// (httpapi.PeerDialer): forwarded requests then travel as Raft does,
// over mutual TLS when the node has Config.TLS.
func (n *Node) DialPeer(ctx context.Context, network, addr string) (net.Conn, error) {
	if n.peer != nil {
		return n.peer.DialContext(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// IsLeader reports whether this node leads and has caught up.
func (n *Node) IsLeader() bool { return n.ready.Load() }

// Shutdown stops the node: Raft, its timers and stores. Waiting requests
// are answered no_leader. It needs no quorum (Raft stops without one), and
// returns by the time ctx ends whatever happens: if stopping takes longer,
// it goes on in the background and Shutdown answers ctx's error (the
// stores are closed only once Raft has stopped). It is safe to call more
// than once, and concurrently: every call waits for the same stop, each
// until its own ctx ends.
func (n *Node) Shutdown(ctx context.Context) error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.stopFastFailover()
		if n.peerSrv != nil {
			n.peerSrv.Close()
		}
		n.endLeadership()
		n.stopped = make(chan struct{})
		go func() {
			defer close(n.stopped)
			err := n.raft.Shutdown().Error()
			n.wg.Wait()
			if c, ok := n.trans.(interface{ Close() error }); ok {
				c.Close()
			}
			if cerr := n.closeRaftStores(); cerr != nil && err == nil {
				err = cerr
			}
			if err != nil {
				n.stopErr = fmt.Errorf("node %s: shutdown: %w", n.cfg.ID, err)
			}
		}()
	})
	select {
	case <-n.stopped:
		return n.stopErr
	case <-ctx.Done():
		return fmt.Errorf("node %s: shutdown: %w (still stopping in the background)", n.cfg.ID, ctx.Err())
	}
}

var errShutdown = errors.New("node is shut down")
