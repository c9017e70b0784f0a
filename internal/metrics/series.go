package metrics

import (
	"math"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// A finished request's counters and histograms are gatehouse's own
// atomics, one set per label tuple (bundle), and Prometheus sees them
// only at scrape time, through requestCollector, as the families
// CounterVecs and HistogramVecs held before. A request then costs a few
// atomic additions: the client library's counters add a float by a
// compare-and-swap loop, and its histograms search their bounds as
// floats and keep a hot and a cold copy of their counts, about 500
// instructions a request in all (BENCHMARKS.md, "The log line's names
// kept per key, its sink called directly, the request's metrics in
// gatehouse's atomics").
//
// Values are integers where the request's are: durations in nanoseconds,
// cost in micro-dollars, tokens. The exposition shows what it showed
// (same names, help texts, labels, buckets and series, zeros included),
// with the sums exact: a float sum of seconds or dollars rounded at every
// addition; this one rounds once, when it is scraped.

// histogram is one series' bucket counts (not cumulative; the last is
// +Inf's) and the sum of its observations in nanoseconds.
type histogram struct {
	counts [len(latencyBuckets) + 1]atomic.Uint64
	sum    atomic.Int64
}

// observe counts d (nanoseconds) in the first bucket whose bound it does
// not exceed, as Prometheus' le does. bounds are the buckets' bounds in
// nanoseconds, whose seconds are exactly the float bounds (nanosBounds),
// so the integer comparison agrees with the float one for every d.
// Requests are short: the search from the smallest bound ends early.
func (h *histogram) observe(d int64, bounds []int64) {
	i := 0
	for i < len(bounds) && d > bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(d)
}

// nanosBounds is bounds in nanoseconds. Each bound is a whole number of
// nanoseconds whose float64(n)/1e9 is the bound itself; New panics
// otherwise (a bucket added that the integer comparison cannot hold).
func nanosBounds(bounds []float64) []int64 {
	ns := make([]int64, len(bounds))
	for i, b := range bounds {
		ns[i] = int64(math.Round(b * 1e9))
		if float64(ns[i])/1e9 != b {
			panic("metrics: bucket bound " + strconv.FormatFloat(b, 'g', -1, 64) + " is not a whole number of nanoseconds")
		}
	}
	return ns
}

// bundle is the series one label tuple of a finished request feeds.
type bundle struct {
	requests                              atomic.Uint64
	duration, ttft, overhead              histogram
	prompt, completion, cached, reasoning atomic.Uint64
	cost                                  atomic.Int64 // micro-dollars
	cache                                 atomic.Uint64
}

// The request families' descriptions: what the Vecs were made with.
type requestDescs struct {
	requests, duration, ttft, overhead, tokens, cost, cache *prometheus.Desc
}

func newRequestDescs() requestDescs {
	return requestDescs{
		requests: prometheus.NewDesc("gatehouse_requests_total",
			"API requests answered, by client-facing model, route, status code and error kind (empty on success).",
			[]string{"model", "route", "code", "error_kind"}, nil),
		duration: prometheus.NewDesc("gatehouse_request_duration_seconds",
			"Time from request received to response finished (streams: to the last event).",
			[]string{"model", "route"}, nil),
		ttft: prometheus.NewDesc("gatehouse_time_to_first_token_seconds",
			"Time from request received to the first streamed chunk written to the client.",
			[]string{"model"}, nil),
		overhead: prometheus.NewDesc("gatehouse_overhead_seconds",
			"The gateway's own time per request, upstream waits excluded, up to the response headers (x-gatehouse-overhead-ms).",
			[]string{"route"}, nil),
		tokens: prometheus.NewDesc("gatehouse_tokens_total",
			"Tokens of answered requests by project, client-facing model, provider and type: prompt, completion, cached (prompt tokens from the provider's cache), reasoning (completion tokens spent reasoning).",
			[]string{"project", "model", "provider", "type"}, nil),
		cost: prometheus.NewDesc("gatehouse_cost_usd_total",
			"Cost settled, in US dollars, by project, client-facing model and provider.",
			[]string{"project", "model", "provider"}, nil),
		cache: prometheus.NewDesc("gatehouse_cache_requests_total",
			"Requests by what the response cache did: hit, semantic, miss or bypass (not read).",
			[]string{"project", "model", "result"}, nil),
	}
}

// requestCollector exports the bundles at scrape time. Several tuples
// can feed one series (the requests counter has no project label, the
// overhead histogram only the route), so the series are summed first.
type requestCollector struct{ m *Metrics }

func (c requestCollector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.m.descs
	for _, desc := range []*prometheus.Desc{d.requests, d.duration, d.ttft, d.overhead, d.tokens, d.cost, d.cache} {
		ch <- desc
	}
}

// seriesKey is a series' label values, in its description's order.
type seriesKey [4]string

// histogramSum is a histogram series summed over the tuples feeding it.
type histogramSum struct {
	counts []uint64
	sum    int64
}

func (s *histogramSum) add(h *histogram, buckets int) {
	if s.counts == nil {
		s.counts = make([]uint64, buckets+1)
	}
	for i := range s.counts {
		s.counts[i] += h.counts[i].Load()
	}
	s.sum += h.sum.Load()
}

func (c requestCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	var (
		requests, tokens          = map[seriesKey]uint64{}, map[seriesKey]uint64{}
		cost                      = map[seriesKey]int64{}
		cache                     = map[seriesKey]uint64{}
		duration, ttft, overheads = map[seriesKey]*histogramSum{}, map[seriesKey]*histogramSum{}, map[seriesKey]*histogramSum{}
	)
	sumInto := func(to map[seriesKey]*histogramSum, k seriesKey, h *histogram, buckets int) {
		s := to[k]
		if s == nil {
			s = &histogramSum{}
			to[k] = s
		}
		s.add(h, buckets)
	}
	m.bundles.m.Range(func(key, v any) bool {
		k, b := key.(bundleKey), v.(*resolved[bundleKey, *bundle]).val
		requests[seriesKey{k.model, k.route, strconv.Itoa(k.code), k.kind}] += b.requests.Load()
		sumInto(duration, seriesKey{k.model, k.route}, &b.duration, len(latencyBuckets))
		sumInto(ttft, seriesKey{k.model}, &b.ttft, len(latencyBuckets))
		sumInto(overheads, seriesKey{k.route}, &b.overhead, len(overheadBuckets))
		for _, t := range [...]struct {
			kind string
			n    *atomic.Uint64
		}{{"prompt", &b.prompt}, {"completion", &b.completion}, {"cached", &b.cached}, {"reasoning", &b.reasoning}} {
			tokens[seriesKey{k.project, k.model, k.provider, t.kind}] += t.n.Load()
		}
		cost[seriesKey{k.project, k.model, k.provider}] += b.cost.Load()
		if k.cache != "" {
			cache[seriesKey{k.project, k.model, k.cache}] += b.cache.Load()
		}
		return true
	})
	d := &m.descs
	for k, n := range requests {
		ch <- prometheus.MustNewConstMetric(d.requests, prometheus.CounterValue, float64(n), k[:4]...)
	}
	for k, n := range tokens {
		ch <- prometheus.MustNewConstMetric(d.tokens, prometheus.CounterValue, float64(n), k[:4]...)
	}
	for k, micros := range cost {
		ch <- prometheus.MustNewConstMetric(d.cost, prometheus.CounterValue, float64(micros)/1e6, k[:3]...)
	}
	for k, n := range cache {
		ch <- prometheus.MustNewConstMetric(d.cache, prometheus.CounterValue, float64(n), k[:3]...)
	}
	for k, s := range duration {
		ch <- constHistogram(d.duration, s, latencyBuckets[:], k[:2])
	}
	for k, s := range ttft {
		ch <- constHistogram(d.ttft, s, latencyBuckets[:], k[:1])
	}
	for k, s := range overheads {
		ch <- constHistogram(d.overhead, s, overheadBuckets[:], k[:1])
	}
}

// constHistogram is s as Prometheus' histogram: cumulative buckets, the
// count, the sum in seconds.
func constHistogram(desc *prometheus.Desc, s *histogramSum, bounds []float64, labels []string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var total uint64
	for i, b := range bounds {
		total += s.counts[i]
		buckets[b] = total
	}
	total += s.counts[len(bounds)]
	return prometheus.MustNewConstHistogram(desc, total, float64(s.sum)/1e9, buckets, labels...)
}
