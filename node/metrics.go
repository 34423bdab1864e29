package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/sequencer"
)

// nodeMetrics are one node's Prometheus metrics: its own registry (GET
// /metrics serves it), the counters fed by the state machine's events and
// the keepalives this node served. The gauges are read from the state
// machine and Raft on every scrape (stateCollector).
type nodeMetrics struct {
	reg       *prometheus.Registry
	grants    prometheus.Counter
	releases  prometheus.Counter
	expiries  prometheus.Counter
	keepalive prometheus.Counter
	// revocations is raftlock_revocations_total by kind (admin,
	// max_hold).
	revocations *prometheus.CounterVec
	// storeWrite is raftlock_storage_write_seconds (storewatch.go).
	storeWrite *prometheus.HistogramVec
}

// newNodeMetrics builds n's registry: raftlock's own metrics, the Go
// runtime's and the process's, and hashicorp/raft's (raftSink).
func newNodeMetrics(n *Node) (*nodeMetrics, error) {
	m := &nodeMetrics{
		reg: prometheus.NewRegistry(),
		grants: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftlock_grants_total",
			Help: "Lock grants this replica applied (every replica applies every grant)."}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftlock_releases_total",
			Help: "Explicit lock releases this replica applied."}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftlock_session_expiries_total",
			Help: "Session expiries this replica applied."}),
		keepalive: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftlock_keepalives_total",
			Help: "Keepalives this replica served as the leader."}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftlock_revocations_total",
			Help: "Grants revoked that this replica applied, by kind (admin: an operator's; max_hold: a hold limit's)."}, []string{"kind"}),
		storeWrite: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "raftlock_storage_write_seconds",
			Help:    "Duration of writes to the Raft stores, fsync included, by store (log: an append of log entries; stable: term, vote).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"store"}),
	}
	sink, err := raftSink()
	if err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{
		m.grants, m.releases, m.expiries, m.keepalive, m.revocations, m.storeWrite,
		&stateCollector{n: n},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		sink,
	} {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("node: register metrics: %w", err)
		}
	}
	return m, nil
}

// count feeds the counters from one state machine event (called from
// onEvent, inside Apply: it must not block).
func (m *nodeMetrics) count(e fsm.Event) {
	switch e.Kind {
	case fsm.EventGranted:
		m.grants.Inc()
	case fsm.EventReleased:
		m.releases.Inc()
	case fsm.EventRevoked:
		kind := e.RevokeKind
		if kind != fsm.RevokeKindMaxHold {
			kind = fsm.RevokeKindAdmin // bounded label values
		}
		m.revocations.WithLabelValues(kind).Inc()
	case fsm.EventSessionRemoved:
		if e.Expired {
			m.expiries.Inc()
		}
	}
}

// The go-metrics sink hashicorp/raft emits to. hashicorp/raft v1.7 reports
// through go-metrics' package-level global (github.com/hashicorp/go-metrics
// /compat, armon/go-metrics in the default build): there is one per
// process, so the sink is built once and registered into every node's
// registry (a Collector may be registered in several). Several nodes in one
// process (tests) therefore all show the same raft_* series; raftlockd runs
// one node per process.
var (
	raftSinkOnce sync.Once
	raftSinkVal  *raftMetricsSink
	raftSinkErr  error
)

// raftSink returns the process's sink of raft's metrics (raftsink.go: the
// series of go-metrics' Prometheus sink, cheaper per sample).
func raftSink() (*raftMetricsSink, error) {
	raftSinkOnce.Do(func() {
		raftSinkVal = newRaftMetricsSink()
		cfg := gometrics.DefaultConfig("")
		cfg.EnableHostname = false
		cfg.EnableHostnameLabel = false
		cfg.EnableRuntimeMetrics = false // the Go collector reports the runtime
		cfg.EnableServiceLabel = false
		if _, err := gometrics.NewGlobal(cfg, raftSinkVal); err != nil {
			raftSinkErr = fmt.Errorf("node: raft metrics: %w", err)
		}
	})
	return raftSinkVal, raftSinkErr
}

// stateCollector reports the gauges read from the state machine and Raft
// at scrape time.
type stateCollector struct{ n *Node }

var (
	descSessions = prometheus.NewDesc("raftlock_sessions_live", "Open sessions in the replicated state.", nil, nil)
	descHeld     = prometheus.NewDesc("raftlock_locks_held", "Locks held, by mode (exclusive, shared).", []string{"mode"}, nil)
	descWaiters  = prometheus.NewDesc("raftlock_lock_waiters", "Waiters queued on all locks.", nil, nil)
	descDelays   = prometheus.NewDesc("raftlock_lock_delays_active", "Locks in a lock-delay.", nil, nil)
	descSems     = prometheus.NewDesc("raftlock_semaphores", "Semaphores (locks taken with permits) held, waited for or in a slot's lock-delay.", nil, nil)
	descSemHeld  = prometheus.NewDesc("raftlock_semaphore_slots_held", "Slots held, over all semaphores.", nil, nil)
	descSemDelay = prometheus.NewDesc("raftlock_semaphore_slots_delayed", "Slots in a lock-delay, over all semaphores.", nil, nil)
	descLeader   = prometheus.NewDesc("raftlock_is_leader", "1 while this replica leads, else 0.", nil, nil)
	descTerm     = prometheus.NewDesc("raftlock_term", "This replica's current Raft term.", nil, nil)
	descApplied  = prometheus.NewDesc("raftlock_applied_index", "Last log index this replica's state machine applied.", nil, nil)
	descStorage  = prometheus.NewDesc("raftlock_storage_errors_total", "Writes to the Raft stores (log entries in wal/ or raft.db; term, vote in raft.db) that failed, e.g. on a full disk.", nil, nil)
	descStoreBad = prometheus.NewDesc("raftlock_storage_failing", "1 while this replica's last write to its Raft stores failed, else 0.", nil, nil)
	descHeadWait = prometheus.NewDesc("raftlock_lock_queue_head_wait_seconds", "On the leader: the longest time the first waiter of any lock's queue has waited, "+
		"counted from when this leader armed its wait (its acquire, a retry of it, or this leader's promotion); 0 without waiters and on followers.", nil, nil)
	descCertExpiry = prometheus.NewDesc("raftlock_tls_cert_expiry_timestamp_seconds", "When this node's TLS certificate (--tls-cert) expires, in Unix seconds; only with TLS.", nil, nil)
	descDiskFree   = prometheus.NewDesc("raftlock_disk_free_bytes", "Bytes free (available to the node) on the filesystem of its data dir.", nil, nil)
	descDiskNeed   = prometheus.NewDesc("raftlock_disk_free_margin_bytes", "Bytes the node must keep free on that filesystem (a raft-wal segment, two snapshots, slack); /v1/health is 503 below it.", nil, nil)
	descDiverged   = prometheus.NewDesc("raftlock_replica_diverged", "1 once the leader found this replica's state digest off the majority's (or it met a corrupt log entry), else 0.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessions, descHeld, descWaiters, descDelays, descSems, descSemHeld, descSemDelay, descLeader, descTerm, descApplied,
		descStorage, descStoreBad, descDiskFree, descDiskNeed, descDiverged, descHeadWait, descCertExpiry} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	var exclusive, shared, waiters, delays, headWait float64
	var sems, semHeld, semDelayed float64
	for _, l := range n.fsm.Locks("") {
		if l.Permits > 0 {
			sems++
			semHeld += float64(len(l.Holders))
			semDelayed += float64(len(l.SlotDelays))
		}
		if len(l.Holders) > 0 {
			if l.Mode == sequencer.Shared {
				shared++
			} else {
				exclusive++
			}
		}
		waiters += float64(len(l.Waiters))
		if t := n.leadership(); len(l.Waiters) > 0 && t != nil {
			w := l.Waiters[0]
			due, armed := t.due(waitTimerKey{waitKey{l.Name, w.Session, w.Holder}, w.WaitSet})
			if armed {
				headWait = max(headWait, time.Since(due.Add(-waitLength(w.WaitFor))).Seconds())
			}
		}
		if l.Delayed {
			delays++
		}
	}
	leader := 0.0
	if n.leading() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(len(n.fsm.Sessions())))
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, exclusive, "exclusive")
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, shared, "shared")
	ch <- prometheus.MustNewConstMetric(descWaiters, prometheus.GaugeValue, waiters)
	ch <- prometheus.MustNewConstMetric(descDelays, prometheus.GaugeValue, delays)
	ch <- prometheus.MustNewConstMetric(descSems, prometheus.GaugeValue, sems)
	ch <- prometheus.MustNewConstMetric(descSemHeld, prometheus.GaugeValue, semHeld)
	ch <- prometheus.MustNewConstMetric(descSemDelay, prometheus.GaugeValue, semDelayed)
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(n.raft.CurrentTerm()))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(n.fsm.AppliedIndex()))
	ch <- prometheus.MustNewConstMetric(descHeadWait, prometheus.GaugeValue, headWait)
	if n.cfg.TLS != nil && n.cfg.TLS.Cert.Leaf != nil {
		ch <- prometheus.MustNewConstMetric(descCertExpiry, prometheus.GaugeValue, float64(n.cfg.TLS.Cert.Leaf.NotAfter.Unix()))
	}
	var storeErrs uint64
	if n.watched != nil {
		storeErrs = n.watched.errors.Load()
	}
	ch <- prometheus.MustNewConstMetric(descStorage, prometheus.CounterValue, float64(storeErrs))
	ch <- prometheus.MustNewConstMetric(descStoreBad, prometheus.GaugeValue, flag(n.StorageError() != nil))
	if d, err := n.DiskSpace(); err == nil {
		ch <- prometheus.MustNewConstMetric(descDiskFree, prometheus.GaugeValue, float64(d.Free))
		ch <- prometheus.MustNewConstMetric(descDiskNeed, prometheus.GaugeValue, float64(d.Margin))
	}
	ch <- prometheus.MustNewConstMetric(descDiverged, prometheus.GaugeValue, flag(n.Divergence() != nil || n.FatalErr() != nil))
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// MetricsGatherer returns the node's registry without asking for a token:
// what a listener the operator chose to expose without authentication
// serves (httpapi.NewMetricsServer, raftlockd --metrics-addr).
func (n *Node) MetricsGatherer() prometheus.Gatherer { return n.metrics.reg }

// MetricsRegisterer is where the HTTP server registers its request
// metrics (httpapi.MetricsService): the node's own registry.
func (n *Node) MetricsRegisterer() prometheus.Registerer { return n.metrics.reg }

// MetricsOpen reports whether GET /metrics needs no token even with ACLs
// on (Config.MetricsOpen, raftlockd --metrics-open).
func (n *Node) MetricsOpen() bool { return n.cfg.MetricsOpen }

// Metrics returns what GET /metrics serves: the node's registry. With ACLs
// on and the metrics not open, secret must be a token with read on the
// empty prefix (every lock). The token is looked up in this replica's own
// state, not the leader's, so that every node answers, a minority one
// too: a token deleted moments ago may still read metrics on a replica
// that has not applied the deletion yet.
func (n *Node) Metrics(ctx context.Context, secret string) (prometheus.Gatherer, error) {
	if !n.cfg.ACL || n.cfg.MetricsOpen {
		return n.metrics.reg, nil
	}
	if secret == "" {
		return nil, api.Errorf(api.CodeUnauthenticated, "ACLs are on: GET /metrics needs a token with read on the empty prefix (or raftlockd --metrics-open)")
	}
	t, ok := n.fsm.TokenByHash(api.HashSecret(secret))
	if !ok {
		return nil, api.Errorf(api.CodeUnauthenticated, "unknown token")
	}
	rules, err := api.ParseRules(t.Rules)
	if err != nil {
		return nil, api.Errorf(api.CodeInternal, "token %s: stored rules: %v", t.ID, err)
	}
	if !rules.Allows(api.AccessRead, "") {
		return nil, api.Errorf(api.CodePermissionDenied, "token %s: GET /metrics needs read on the empty prefix", t.Name)
	}
	return n.metrics.reg, nil
}
