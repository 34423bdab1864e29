package node

import (
	"sync"
	"sync/atomic"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// raftMetricsSink is the go-metrics sink hashicorp/raft reports to: the
// series go-metrics' Prometheus sink (github.com/hashicorp/go-metrics
// /compat/prometheus) makes, with the same names, help, labels, types
// (samples as summaries with its quantiles and 10 s max age) and expiry
// (a series not updated for a minute is dropped), at a fraction of its
// cost per sample. raft reports several samples for every log entry on
// every node; that sink flattens the key into new strings, hashes them
// into a sync.Map and stores a fresh copy of the series' record on every
// one. This one finds a series by a key built in a stack buffer and only
// stamps its update time.
type raftMetricsSink struct {
	expiration time.Duration
	now        func() time.Time

	mu     sync.RWMutex
	series map[string]*sinkSeries
}

// sinkSeries is one series of the sink.
type sinkSeries struct {
	gauge   prometheus.Gauge
	counter prometheus.Counter
	summary prometheus.Summary
	// updated is when the series was last written (UnixNano).
	updated atomic.Int64
}

func (s *sinkSeries) collector() prometheus.Collector {
	switch {
	case s.gauge != nil:
		return s.gauge
	case s.counter != nil:
		return s.counter
	default:
		return s.summary
	}
}

// The kinds of series, the first byte of a series' key.
const (
	kindGauge   = 'g'
	kindCounter = 'c'
	kindSummary = 's'
)

// sinkExpiration is how long a series lives without an update, as in
// go-metrics' Prometheus sink.
const sinkExpiration = 60 * time.Second

func newRaftMetricsSink() *raftMetricsSink {
	return &raftMetricsSink{expiration: sinkExpiration, now: time.Now, series: make(map[string]*sinkSeries)}
}

var (
	_ gometrics.MetricSink = (*raftMetricsSink)(nil)
	_ prometheus.Collector = (*raftMetricsSink)(nil)
)

// flatByte is b as go-metrics' Prometheus sink writes it in a name: ' ',
// '.', '=', '-' and '/' become '_'.
func flatByte(b byte) byte {
	switch b {
	case ' ', '.', '=', '-', '/':
		return '_'
	}
	return b
}

// appendKey appends a series' key: its kind, its flattened name (the
// parts joined by '_') and its labels (";name=value" each), which is what
// identifies a series in go-metrics' Prometheus sink.
func appendKey(dst []byte, kind byte, parts []string, labels []gometrics.Label) []byte {
	dst = append(dst, kind)
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, '_')
		}
		for j := 0; j < len(p); j++ {
			dst = append(dst, flatByte(p[j]))
		}
	}
	for _, l := range labels {
		dst = append(dst, ';')
		dst = append(dst, l.Name...)
		dst = append(dst, '=')
		dst = append(dst, l.Value...)
	}
	return dst
}

// get returns the series of kind, parts and labels, made on first use.
func (s *raftMetricsSink) get(kind byte, parts []string, labels []gometrics.Label) *sinkSeries {
	var buf [128]byte
	key := appendKey(buf[:0], kind, parts, labels)
	s.mu.RLock()
	se := s.series[string(key)]
	s.mu.RUnlock()
	if se == nil {
		se = s.make(string(key), kind, parts, labels)
	}
	se.updated.Store(s.now().UnixNano())
	return se
}

// make returns the series of key, making it if it is not there yet.
func (s *raftMetricsSink) make(key string, kind byte, parts []string, labels []gometrics.Label) *sinkSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.series[key]; se != nil {
		return se
	}
	name := string(appendKey(nil, kind, parts, nil)[1:])
	var cl prometheus.Labels
	if len(labels) > 0 {
		cl = make(prometheus.Labels, len(labels))
		for _, l := range labels {
			cl[l.Name] = l.Value
		}
	}
	se := &sinkSeries{}
	switch kind {
	case kindGauge:
		se.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: name, ConstLabels: cl})
	case kindCounter:
		se.counter = prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name, ConstLabels: cl})
	default:
		se.summary = prometheus.NewSummary(prometheus.SummaryOpts{Name: name, Help: name, ConstLabels: cl,
			MaxAge: 10 * time.Second, Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}})
	}
	s.series[key] = se
	return se
}

// SetGauge implements gometrics.MetricSink.
func (s *raftMetricsSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements gometrics.MetricSink.
func (s *raftMetricsSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.get(kindGauge, key, labels).gauge.Set(float64(val))
}

// SetPrecisionGauge implements gometrics.PrecisionGaugeMetricSink (when the
// go-metrics in use has it).
func (s *raftMetricsSink) SetPrecisionGauge(key []string, val float64) {
	s.SetPrecisionGaugeWithLabels(key, val, nil)
}

// SetPrecisionGaugeWithLabels is SetGaugeWithLabels with a float64.
func (s *raftMetricsSink) SetPrecisionGaugeWithLabels(key []string, val float64, labels []gometrics.Label) {
	s.get(kindGauge, key, labels).gauge.Set(val)
}

// EmitKey implements gometrics.MetricSink: nothing, as in go-metrics'
// Prometheus sink.
func (s *raftMetricsSink) EmitKey([]string, float32) {}

// IncrCounter implements gometrics.MetricSink.
func (s *raftMetricsSink) IncrCounter(key []string, val float32) {
	s.IncrCounterWithLabels(key, val, nil)
}

// IncrCounterWithLabels implements gometrics.MetricSink. A negative
// increment, which a counter cannot take, is dropped.
func (s *raftMetricsSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	c := s.get(kindCounter, key, labels).counter
	if val >= 0 {
		c.Add(float64(val))
	}
}

// AddSample implements gometrics.MetricSink.
func (s *raftMetricsSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements gometrics.MetricSink.
func (s *raftMetricsSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.get(kindSummary, key, labels).summary.Observe(float64(val))
}

// Describe implements prometheus.Collector: nothing (an unchecked
// collector: its series come and go).
func (s *raftMetricsSink) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: every series updated within
// the expiration; older ones are dropped.
func (s *raftMetricsSink) Collect(ch chan<- prometheus.Metric) {
	cutoff := s.now().Add(-s.expiration).UnixNano()
	var live []prometheus.Collector
	s.mu.Lock()
	for k, se := range s.series {
		if se.updated.Load() < cutoff {
			delete(s.series, k)
			continue
		}
		live = append(live, se.collector())
	}
	s.mu.Unlock()
	for _, c := range live {
		c.Collect(ch)
	}
}
