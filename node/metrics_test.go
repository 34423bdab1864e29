package node

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/sequencer"
)

// scrape GETs /metrics at addr (with secret as bearer token, "" for none)
// and parses it with the Prometheus text parser.
func scrape(ctx context.Context, addr, secret string) (map[string]*dto.MetricFamily, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, 0, err
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	return mf, resp.StatusCode, err
}

// metricValue is the value of the series of family name whose labels
// include want (gauge, counter or untyped); ok false if there is none.
func metricValue(mf map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := mf[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsFollowTheState: 3 sessions opened, one exclusive and one
// shared lock held, one waiter queued, one session expired (leaving its
// lock in lock-delay), one lock released, two keepalives → the leader's
// /metrics, parsed with the Prometheus parser, reads exactly that.
func TestMetricsFollowTheState(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg)
		cfg.FailoverGrace = NoFailoverGrace
	}, withHTTP)
	cl := c.client(t)
	ctx := ctxT(t)
	_, li := c.leader()

	open := func(name string, ttl time.Duration) api.Info {
		info, err := cl.OpenSession(ctx, api.OpenRequest{Name: name, TTL: ttl, LockDelay: time.Minute})
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		return info
	}
	s1, s2, s3 := open("s1", time.Minute), open("s2", time.Minute), open("s3", 2*time.Second)
	acquire := func(s api.Info, lock string, m sequencer.Mode) {
		if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: lock, Session: s.ID, Holder: s.Name, Mode: m}); err != nil {
			t.Fatalf("%s acquire %s: %v", s.Name, lock, err)
		}
	}
	acquire(s3, "z", sequencer.Exclusive) // first: s3 expires after 2 s
	acquire(s1, "x", sequencer.Exclusive)
	acquire(s2, "y", sequencer.Shared)
	acquire(s1, "w", sequencer.Exclusive)
	if err := cl.Release(ctx, api.ReleaseRequest{Name: "w", Session: s1.ID, Holder: "s1"}); err != nil {
		t.Fatalf("release w: %v", err)
	}
	for range 2 {
		if _, err := cl.KeepAlive(ctx, s1.ID); err != nil {
			t.Fatalf("keepalive: %v", err)
		}
	}
	// s2 queues on x (held by s1) until the test ends.
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := cl.Acquire(wctx, api.AcquireRequest{Name: "x", Session: s2.ID, Holder: "s2-wait", Mode: sequencer.Exclusive, Wait: time.Minute})
		waited <- err
	}()
	t.Cleanup(func() { cancel(); <-waited })

	want := map[string]float64{
		"raftlock_sessions_live":          2,
		"raftlock_locks_held/exclusive":   1,
		"raftlock_locks_held/shared":      1,
		"raftlock_lock_waiters":           1,
		"raftlock_lock_delays_active":     1,
		"raftlock_grants_total":           4,
		"raftlock_releases_total":         1,
		"raftlock_session_expiries_total": 1,
		"raftlock_keepalives_total":       2,
		"raftlock_is_leader":              1,
	}
	addr := c.httpAddrs[li]
	var mf map[string]*dto.MetricFamily
	eventually(t, 20*time.Second, "metrics reach the state", func() error {
		var err error
		var status int
		if mf, status, err = scrape(ctx, addr, ""); err != nil || status != http.StatusOK {
			return fmt.Errorf("scrape: HTTP %d: %v", status, err)
		}
		for key, v := range want {
			name, mode, _ := strings.Cut(key, "/")
			labels := map[string]string{}
			if mode != "" {
				labels["mode"] = mode
			}
			got, ok := metricValue(mf, name, labels)
			if !ok || got != v {
				return fmt.Errorf("%s = %v (present %v), want %v", key, got, ok, v)
			}
		}
		return nil
	})
	// The queue's head has waited since its acquire, on the leader; the
	// followers say 0.
	eventually(t, 10*time.Second, "the head of x's queue has waited", func() error {
		mf, _, err := scrape(ctx, addr, "")
		if err != nil {
			return err
		}
		if v, ok := metricValue(mf, "raftlock_lock_queue_head_wait_seconds", nil); !ok || v <= 0 || v > 60 {
			return fmt.Errorf("raftlock_lock_queue_head_wait_seconds = %v (present %v)", v, ok)
		}
		return nil
	})
	if fmf, _, err := scrape(ctx, c.httpAddrs[(li+1)%3], ""); err != nil {
		t.Error(err)
	} else if v, ok := metricValue(fmf, "raftlock_lock_queue_head_wait_seconds", nil); !ok || v != 0 {
		t.Errorf("a follower's raftlock_lock_queue_head_wait_seconds = %v (present %v), want 0", v, ok)
	}
	for _, name := range []string{"raftlock_term", "raftlock_applied_index"} {
		if v, ok := metricValue(mf, name, nil); !ok || v < 1 {
			t.Errorf("%s = %v (present %v), want >= 1", name, v, ok)
		}
	}
	if v, ok := metricValue(mf, "raftlock_http_request_duration_seconds", map[string]string{"route": "POST /v1/acquire", "code": "200"}); !ok || v < 1 {
		t.Errorf("request durations of POST /v1/acquire 200: count %v (present %v)", v, ok)
	}
	for _, name := range []string{"raft_commitTime", "raft_apply", "go_goroutines", "raft_state_leader"} {
		if mf[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}
}
