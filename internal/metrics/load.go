package metrics

import "github.com/prometheus/client_golang/prometheus"

// DeploymentLoad is what least-tokens sees of one deployment: the
// requests (streams included) and the tokens the gateway has in flight
// there.
type DeploymentLoad struct {
	Provider, Model string
	Requests        int64
	Tokens          int64
}

// Deployments sets how the in-flight gauges are read: at scrape time,
// from the routing pool of the generation serving now, so the request
// path pays nothing for them and a reload's removed deployments vanish
// with it.
func (m *Metrics) Deployments(read func() []DeploymentLoad) {
	if m != nil {
		m.load.Store(&read)
	}
}

var (
	inFlightRequestsDesc = prometheus.NewDesc("gatehouse_deployment_in_flight_requests",
		"Requests (streams included) the gateway has in flight at each deployment.", []string{"provider", "model"}, nil)
	inFlightTokensDesc = prometheus.NewDesc("gatehouse_deployment_in_flight_tokens",
		"Estimated tokens (prompt plus output cap) the gateway has in flight at each deployment: what least-tokens balances.", []string{"provider", "model"}, nil)
)

// deploymentCollector reports Deployments' gauges.
type deploymentCollector struct{ m *Metrics }

func (c deploymentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightRequestsDesc
	ch <- inFlightTokensDesc
}

func (c deploymentCollector) Collect(ch chan<- prometheus.Metric) {
	read := c.m.load.Load()
	if read == nil {
		return
	}
	for _, d := range (*read)() {
		ch <- prometheus.MustNewConstMetric(inFlightRequestsDesc, prometheus.GaugeValue, float64(d.Requests), d.Provider, d.Model)
		ch <- prometheus.MustNewConstMetric(inFlightTokensDesc, prometheus.GaugeValue, float64(d.Tokens), d.Provider, d.Model)
	}
}

// SinkStats is what the usage-record sink counts (*account.Sink).
type SinkStats interface {
	Depth() int
	Written() uint64
	Spilled() uint64
	Replayed() uint64
	Dropped() uint64
}

// UsageSink registers the sink's queue depth and counters, read at
// scrape time.
func (m *Metrics) UsageSink(s SinkStats) {
	if m == nil || s == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gatehouse_usage_queue_depth",
			Help: "Usage records waiting to be written."}, func() float64 { return float64(s.Depth()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_usage_records_written_total",
			Help: "Usage records stored in the database (replayed ones included)."}, func() float64 { return float64(s.Written()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_usage_records_spilled_total",
			Help: "Usage records written to the spill file because the database failed or the queue was full."}, func() float64 { return float64(s.Spilled()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_usage_records_replayed_total",
			Help: "Spilled usage records stored in the database once it answered again."}, func() float64 { return float64(s.Replayed()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_usage_records_dropped_total",
			Help: "Usage records lost: the spill file could not be written, or a line of it not read back."}, func() float64 { return float64(s.Dropped()) }),
	)
}

// CacheStats is what the exact cache's in-process tier holds
// (*cache.Memory).
type CacheStats interface {
	Len() int
	Bytes() int64
}

// Cache registers the in-process tier's entries and bytes, read at
// scrape time.
func (m *Metrics) Cache(s CacheStats) {
	if m == nil || s == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gatehouse_cache_entries",
			Help: "Answers in the exact cache's in-process tier."}, func() float64 { return float64(s.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gatehouse_cache_bytes",
			Help: "Bytes the exact cache's in-process tier counts against cache.exact.max_bytes."}, func() float64 { return float64(s.Bytes()) }),
	)
}

// AdmitStats is what cluster mode's admissions count (the Redis
// limiter's): the script calls that admitted requests, and the
// admissions that waited behind their project's call in flight and went
// together in a later one.
type AdmitStats struct {
	Calls, Queued uint64
}

// Admissions registers the admission counters, read at scrape time.
func (m *Metrics) Admissions(read func() AdmitStats) {
	if m == nil || read == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_admission_calls_total",
			Help: "Redis script calls that admitted requests (cluster mode): one a request while Redis keeps up, one a batch under load."}, func() float64 { return float64(read().Calls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_admissions_queued_total",
			Help: "Admissions that waited for their project's script call in flight and went to Redis in a later call, with the others that waited (cluster mode)."}, func() float64 { return float64(read().Queued) }),
	)
}

// SettleStats is what cluster mode's settle queue counts (the Redis
// limiter's, internal/store/redis): settles waiting, applied, the script
// calls that applied them, Settle calls that found the queue full and
// waited for room, and settles given up on.
type SettleStats struct {
	Queued                       int
	Settled, Calls, Waited, Lost uint64
}

// Settles registers the settle queue's depth and counters, read at scrape
// time. Settles per call is the batching: Redis's script calls a request
// are 1 + calls/settled.
func (m *Metrics) Settles(read func() SettleStats) {
	if m == nil || read == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gatehouse_settle_queue_depth",
			Help: "Settlements waiting to be sent to Redis (cluster mode)."}, func() float64 { return float64(read().Queued) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_settles_total",
			Help: "Settlements applied in Redis (cluster mode)."}, func() float64 { return float64(read().Settled) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_settle_calls_total",
			Help: "Redis script calls that applied the settlements, each a batch of them."}, func() float64 { return float64(read().Calls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_settle_waits_total",
			Help: "Settlements that found the settle queue full and waited for room (Redis not keeping up)."}, func() float64 { return float64(read().Waited) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gatehouse_settles_lost_total",
			Help: "Settlements given up on (queue still full after waiting, or Redis failing every attempt); each reservation stays counted at its estimate."}, func() float64 { return float64(read().Lost) }),
	)
}
