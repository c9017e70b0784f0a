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
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gatehouse/internal/llm"
)

// Metrics is the set of instruments of one process. A nil *Metrics
// records nothing, so code paths need no checks.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	// descs describe the families a finished request feeds, kept in
	// bundles (see series.go); latencyNanos and overheadNanos are their
	// histograms' bounds in nanoseconds.
	descs                       requestDescs
	latencyNanos, overheadNanos []int64

	denials *prometheus.CounterVec
	// inFlight counts the requests being served, read at scrape time
	// (gatehouse_requests_in_flight): an integer addition where the
	// client library's gauge adds a float by a compare-and-swap loop.
	inFlight       atomic.Int64
	attempts       *prometheus.CounterVec
	connectRetries *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	breakerState   *prometheus.GaugeVec
	breakerChanges *prometheus.CounterVec
	upstreamDown   *prometheus.GaugeVec

	bundles      resolvedSet[bundleKey, *bundle]
	attemptPairs resolvedSet[attemptKey, *attemptPair]
	// load reads the current generation's deployments at scrape time.
	load atomic.Pointer[func() []DeploymentLoad]
}

// overheadBuckets span the gateway's own time: tens of microseconds to a
// slow second.
var overheadBuckets = [...]float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, 1}

// latencyBuckets span a cached answer (sub-millisecond) to a long
// generation (minutes).
var latencyBuckets = [...]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New builds the instruments on a fresh registry, with the Go runtime and
// process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg:           reg,
		descs:         newRequestDescs(),
		latencyNanos:  nanosBounds(latencyBuckets[:]),
		overheadNanos: nanosBounds(overheadBuckets[:]),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_limit_denials_total",
			Help: "Requests refused by a limit, by project, the limit's scope (key, project, customer, key_model) and kind (requests, tokens, budget).",
		}, []string{"project", "scope", "kind"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_routing_decisions_total",
			Help: "Deployments chosen, by client-facing model, the model's strategy and the provider chosen (one per upstream attempt).",
		}, []string{"model", "strategy", "provider"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_upstream_attempts_total",
			Help: "Upstream calls by provider, upstream model and outcome: success, failure (counts toward the breaker), rejected (the upstream refused the request itself) or canceled.",
		}, []string{"provider", "model", "outcome"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gatehouse_breaker_state",
			Help: "Circuit breaker of each deployment: 0 closed, 1 half-open, 2 open.",
		}, []string{"provider", "model"}),
		connectRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_upstream_connect_retries_total",
			Help: "Connects to an upstream that failed before anything was sent (refused, reset, out of descriptors or ports) and were tried again, by provider and cause.",
		}, []string{"provider", "cause"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_breaker_transitions_total",
			Help: "Circuit breaker state changes, by the state entered.",
		}, []string{"provider", "model", "state"}),
		upstreamDown: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gatehouse_upstream_health_check_failing",
			Help: "1 while a provider's active health check fails (its deployments are skipped), else 0.",
		}, []string{"provider"}),
	}
	m.bundles.keepAll = true // a bundle holds its tuple's counts
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gatehouse_requests_in_flight",
		Help: "API requests being served.",
	}, func() float64 { return float64(m.inFlight.Load()) })
	reg.MustRegister(requestCollector{m}, m.denials,
		inFlight, m.decisions, m.attempts, m.connectRetries, m.breakerState, m.breakerChanges, m.upstreamDown, deploymentCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m
}

// Registry returns the registry, for collectors registered elsewhere.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Attempt records one upstream call: the routing decision that chose
// the deployment (group is the client-facing model, strategy its
// strategy) and how the call went.
func (m *Metrics) Attempt(group, strategy, provider, model, outcome string) {
	if m == nil {
		return
	}
	k := attemptKey{group, strategy, provider, model, outcome}
	a := m.attemptSeries(&k)
	a.decision.Inc()
	a.attempt.Inc()
}

// dropAttemptPairs forgets the resolved counters of the tuples drop
// matches, whose series were just deleted: a deployment a later reload
// brings back must count into registered series again.
func (m *Metrics) dropAttemptPairs(drop func(attemptKey) bool) { m.attemptPairs.drop(drop) }

// attemptKey is the label tuple of an upstream attempt's two counters.
type attemptKey struct{ group, strategy, provider, model, outcome string }

// attemptPair is an attemptKey's counters resolved once: an attempt then
// costs one lock-free map lookup instead of two vector lookups, each
// validating and hashing its labels under the vector's lock.
type attemptPair struct{ decision, attempt prometheus.Counter }

// slot is the key's cheap hash for resolvedSet's recent table: the
// addresses of its group, provider, model and outcome (see bundleKey's).
func (k attemptKey) slot() uint {
	return mix(addr(k.group) ^ addr(k.provider)<<1 ^ addr(k.model)<<2 ^ addr(k.outcome)<<3)
}

// identical is bundleKey.identical's test for an attempt's tuple.
func (k *attemptKey) identical(o *attemptKey) bool {
	return differ(k.group, o.group)|differ(k.strategy, o.strategy)|differ(k.provider, o.provider)|
		differ(k.model, o.model)|differ(k.outcome, o.outcome) == 0
}

// same is *k == *o, by llm.SameString, written as bundleKey.same is.
func (k *attemptKey) same(o *attemptKey) bool {
	if len(k.group) != len(o.group) || len(k.strategy) != len(o.strategy) || len(k.provider) != len(o.provider) ||
		len(k.model) != len(o.model) || len(k.outcome) != len(o.outcome) {
		return false
	}
	return llm.SameData(k.group, o.group) && llm.SameData(k.strategy, o.strategy) && llm.SameData(k.provider, o.provider) &&
		llm.SameData(k.model, o.model) && llm.SameData(k.outcome, o.outcome)
}

func (m *Metrics) attemptSeries(k *attemptKey) *attemptPair {
	if r := m.attemptPairs.recentFor(k.slot()); r != nil && (r.key.identical(k) || r.key.same(k)) {
		return r.val
	}
	return m.attemptPairs.get(*k, m.newAttemptPair)
}

func (m *Metrics) newAttemptPair(k attemptKey) *attemptPair {
	return &attemptPair{decision: m.decisions.WithLabelValues(k.group, k.strategy, k.provider),
		attempt: m.attempts.WithLabelValues(k.provider, k.model, k.outcome)}
}

// ConnectRetry records a connect to provider's upstream that failed
// before anything was sent and is tried again; cause is the error's
// short name (refused, reset, descriptors, ports …).
func (m *Metrics) ConnectRetry(provider, cause string) {
	if m == nil {
		return
	}
	m.connectRetries.WithLabelValues(provider, cause).Inc()
}

// Forget drops the series of a deployment a config reload removed: its
// breaker, its attempts and its routing decisions.
func (m *Metrics) Forget(provider, model string) {
	if m == nil {
		return
	}
	m.breakerState.DeleteLabelValues(provider, model)
	m.breakerChanges.DeletePartialMatch(prometheus.Labels{"provider": provider, "model": model})
	m.attempts.DeletePartialMatch(prometheus.Labels{"provider": provider, "model": model})
	m.dropAttemptPairs(func(k attemptKey) bool { return k.provider == provider && k.model == model })
}

// ForgetProvider drops the series of a provider a reload removed.
func (m *Metrics) ForgetProvider(provider string) {
	if m == nil {
		return
	}
	m.upstreamDown.DeleteLabelValues(provider)
	m.decisions.DeletePartialMatch(prometheus.Labels{"provider": provider})
	m.connectRetries.DeletePartialMatch(prometheus.Labels{"provider": provider})
	m.dropAttemptPairs(func(k attemptKey) bool { return k.provider == provider })
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
