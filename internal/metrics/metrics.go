// Package metrics owns gatehouse's Prometheus instruments: one Metrics
// value per process, built by the composition root and passed to whoever
// records, with its own registry (never the default one, no package-level
// state), served at GET /metrics.
//
// It imports the Prometheus client only; the packages that record (server,
// and route through hooks) never import it back.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the set of instruments of one process. A nil *Metrics
// records nothing, so code paths need no checks.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	ttft            *prometheus.HistogramVec
	attempts        *prometheus.CounterVec
	breakerState    *prometheus.GaugeVec
	breakerChanges  *prometheus.CounterVec
	upstreamDown    *prometheus.GaugeVec
}

// latencyBuckets span a cached answer (sub-millisecond) to a long
// generation (minutes).
var latencyBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New builds the instruments on a fresh registry, with the Go runtime and
// process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_requests_total",
			Help: "API requests answered, by client-facing model, route, status code and error kind (empty on success).",
		}, []string{"model", "route", "code", "error_kind"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_request_duration_seconds",
			Help:    "Time from request received to response finished (streams: to the last event).",
			Buckets: latencyBuckets,
		}, []string{"model", "route"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_time_to_first_token_seconds",
			Help:    "Time from request received to the first streamed chunk written to the client.",
			Buckets: latencyBuckets,
		}, []string{"model"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_upstream_attempts_total",
			Help: "Upstream calls by provider, upstream model and outcome: success, failure (counts toward the breaker), rejected (the upstream refused the request itself) or canceled.",
		}, []string{"provider", "model", "outcome"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gatehouse_breaker_state",
			Help: "Circuit breaker of each deployment: 0 closed, 1 half-open, 2 open.",
		}, []string{"provider", "model"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_breaker_transitions_total",
			Help: "Circuit breaker state changes, by the state entered.",
		}, []string{"provider", "model", "state"}),
		upstreamDown: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gatehouse_upstream_health_check_failing",
			Help: "1 while a provider's active health check fails (its deployments are skipped), else 0.",
		}, []string{"provider"}),
	}
	reg.MustRegister(m.requests, m.requestDuration, m.ttft, m.attempts, m.breakerState, m.breakerChanges, m.upstreamDown,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m
}

// Registry returns the registry, for collectors registered elsewhere.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Request records one answered API request. model is the client-facing
// name when it was routed (never an unknown name from the client, which
// would let callers grow the label set); kind is the error kind or "".
// ttft is 0 for answers that were not streamed.
func (m *Metrics) Request(model, route string, code int, kind string, took, ttft time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(model, route, strconv.Itoa(code), kind).Inc()
	m.requestDuration.WithLabelValues(model, route).Observe(took.Seconds())
	if ttft > 0 {
		m.ttft.WithLabelValues(model).Observe(ttft.Seconds())
	}
}

// Attempt records one upstream call.
func (m *Metrics) Attempt(provider, model, outcome string) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(provider, model, outcome).Inc()
}

// Breaker records a deployment's breaker state (0 closed, 1 half-open,
// 2 open); changed counts a transition into it.
func (m *Metrics) Breaker(provider, model string, state int, name string, changed bool) {
	if m == nil {
		return
	}
	m.breakerState.WithLabelValues(provider, model).Set(float64(state))
	if changed {
		m.breakerChanges.WithLabelValues(provider, model, name).Inc()
	}
}

// HealthCheck records whether a provider's active health check fails.
func (m *Metrics) HealthCheck(provider string, failing bool) {
	if m == nil {
		return
	}
	v := 0.0
	if failing {
		v = 1
	}
	m.upstreamDown.WithLabelValues(provider).Set(v)
}
