package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raftlock/raftlock/api"
)

// NewMetricsServer returns the handler of a node's plain health and metrics
// listener (raftlockd --metrics-addr, like etcd's --listen-metrics-urls):
// GET /v1/health (with ?stale) and GET /metrics, nothing else, and no
// token asked for either, whatever the ACLs, so that Kubernetes probes and
// Prometheus need neither a client certificate nor a secret. Its requests
// are not counted in raftlock_http_request_duration_seconds. /metrics
// serves svc.MetricsGatherer() (nil: it answers not_found).
func NewMetricsServer(svc Service, opts ...ServerOption) *Server {
	return NewServer(svc, append(opts, func(s *Server) { s.metricsOnly = true })...)
}

// requestDurationName is the server's request-duration histogram.
const requestDurationName = "raftlock_http_request_duration_seconds"

// newRequestDurations returns the request-duration histogram registered in
// svc's registry (the one already there when another Server of the same
// node, e.g. the peer port's, registered it first); nil when svc serves no
// metrics.
func newRequestDurations(svc Service) *prometheus.HistogramVec {
	reg := svc.MetricsRegisterer()
	if reg == nil {
		return nil
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    requestDurationName,
		Help:    "HTTP API requests by route pattern and status code: time to answer (a blocking acquire or watch counts its wait).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route", "code"})
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
				return prev
			}
		}
		return nil
	}
	return h
}

// observeRequest records one answered request under its route pattern
// ("unmatched" when no route matched) and status code.
func (s *Server) observeRequest(rw *responseWriter, route string, start time.Time) {
	if s.durations == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	status := rw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.observer(route, status).Observe(time.Since(start).Seconds())
}

// handleMetrics answers GET /metrics in the Prometheus text format, on
// every node by itself (never forwarded). With ACLs on and the metrics not
// open, it hands the bearer token to the service, which authorizes it.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.metricsOnly {
		g := s.svc.MetricsGatherer()
		if g == nil {
			return api.Errorf(api.CodeNotFound, "this server exports no metrics")
		}
		promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
		return nil
	}
	if s.svc.MetricsRegisterer() == nil {
		return api.Errorf(api.CodeNotFound, "this server exports no metrics")
	}
	secret := ""
	if s.svc.ACLEnabled() && !s.svc.MetricsOpen() {
		if h := r.Header.Get("Authorization"); h != "" {
			var err error
			if secret, err = api.ParseBearer(h); err != nil {
				return err
			}
		}
	}
	g, err := s.svc.Metrics(r.Context(), secret)
	if err != nil {
		if api.CodeOf(err) == api.CodeUnauthenticated {
			w.Header().Set("WWW-Authenticate", `Bearer realm="raftlock"`)
		}
		return err
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	return nil
}
