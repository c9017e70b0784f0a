package metrics

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// vecReference is what Observe fed before its series became gatehouse's
// atomics: the client library's Vecs, made as they were, observed as they
// were. The exposition of the two must agree.
type vecReference struct {
	reg                               *prometheus.Registry
	requests, tokens, cost, cacheReqs *prometheus.CounterVec
	duration, ttft, overhead          *prometheus.HistogramVec
}

func newVecReference() *vecReference {
	d := newRequestDescs()
	help := func(desc *prometheus.Desc) string {
		s := desc.String() // Desc{fqName: "…", help: "…", …}
		at := strings.Index(s, `help: "`) + len(`help: "`)
		return s[at : at+strings.Index(s[at:], `", `)]
	}
	r := &vecReference{reg: prometheus.NewRegistry()}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gatehouse_requests_total", Help: help(d.requests)},
		[]string{"model", "route", "code", "error_kind"})
	r.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gatehouse_request_duration_seconds", Help: help(d.duration),
		Buckets: latencyBuckets[:]}, []string{"model", "route"})
	r.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gatehouse_time_to_first_token_seconds", Help: help(d.ttft),
		Buckets: latencyBuckets[:]}, []string{"model"})
	r.overhead = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gatehouse_overhead_seconds", Help: help(d.overhead),
		Buckets: overheadBuckets[:]}, []string{"route"})
	r.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gatehouse_tokens_total", Help: help(d.tokens)},
		[]string{"project", "model", "provider", "type"})
	r.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gatehouse_cost_usd_total", Help: help(d.cost)},
		[]string{"project", "model", "provider"})
	r.cacheReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gatehouse_cache_requests_total", Help: help(d.cache)},
		[]string{"project", "model", "result"})
	r.reg.MustRegister(r.requests, r.duration, r.ttft, r.overhead, r.tokens, r.cost, r.cacheReqs)
	return r
}

// observe is the former Observe, series resolved as its bundles did.
func (r *vecReference) observe(o *RequestObs) {
	code := fmt.Sprint(o.Code)
	r.requests.WithLabelValues(o.Model, o.Route, code, o.ErrorKind).Inc()
	r.duration.WithLabelValues(o.Model, o.Route).Observe(o.Took.Seconds())
	ttft := r.ttft.WithLabelValues(o.Model)
	if o.TTFT > 0 {
		ttft.Observe(o.TTFT.Seconds())
	}
	r.overhead.WithLabelValues(o.Route).Observe(o.Overhead.Seconds())
	for _, t := range []struct {
		kind string
		n    int
	}{{"prompt", o.PromptTokens}, {"completion", o.CompletionTokens}, {"cached", o.CachedTokens}, {"reasoning", o.ReasoningTokens}} {
		c := r.tokens.WithLabelValues(o.Project, o.Model, o.Provider, t.kind)
		if t.n > 0 {
			c.Add(float64(t.n))
		}
	}
	c := r.cost.WithLabelValues(o.Project, o.Model, o.Provider)
	if o.CostMicros > 0 {
		c.Add(float64(o.CostMicros) / 1e6)
	}
	if o.Cache != "" {
		r.cacheReqs.WithLabelValues(o.Project, o.Model, o.Cache).Inc()
	}
}

// requestFamilies is the exposition of the request families only.
func requestFamilies(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range fams {
		switch f.GetName() {
		case "gatehouse_requests_total", "gatehouse_request_duration_seconds", "gatehouse_time_to_first_token_seconds",
			"gatehouse_overhead_seconds", "gatehouse_tokens_total", "gatehouse_cost_usd_total", "gatehouse_cache_requests_total":
			if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return buf.String()
}

// TestRequestSeriesMatchTheVecs: the request families served from the
// bundles are byte for byte those the client library's Vecs served for
// the same requests — names, help texts, labels, series (zeros
// included), bucket counts, sums — over many tuples sharing series and
// most buckets (TestHistogramBounds takes each bound). Durations and
// costs are dyadic fractions here, so that the Vecs' float sums are
// exact too.
func TestRequestSeriesMatchTheVecs(t *testing.T) {
	m, ref := New(), newVecReference()
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	// Whole nanoseconds that are dyadic fractions of a second: from 1/512.
	durations := []time.Duration{0, time.Second / 512, time.Second / 256, time.Second / 64, time.Second / 8, time.Second / 2,
		time.Second, 2 * time.Second, 8 * time.Second, 64 * time.Second, 256 * time.Second, 512 * time.Second}
	for i := range 3000 {
		o := &RequestObs{Project: pick("qa", "prod", ""), Model: pick("chat", "fast", ""), Provider: pick("up", "down", ""),
			Route: pick("/v1/chat/completions", "/v1/messages"), Code: []int{200, 429, 502}[rng.IntN(3)],
			ErrorKind: pick("", "budget"), Cache: pick("", "hit", "miss"),
			Took: durations[rng.IntN(len(durations))], Overhead: durations[rng.IntN(8)],
			PromptTokens: rng.IntN(3) * 100, CompletionTokens: rng.IntN(2) * 7, CachedTokens: rng.IntN(2), ReasoningTokens: rng.IntN(2) * 3,
			CostMicros: int64(rng.IntN(3)) * 250_000}
		if i%3 == 0 {
			o.TTFT = durations[rng.IntN(len(durations))]
		}
		m.Observe(o)
		ref.observe(o)
	}
	// A tuple that fed nothing but its request: its series show zeros.
	zero := &RequestObs{Project: "idle", Model: "slow", Provider: "side", Route: "/v1/messages", Code: 200}
	m.Observe(zero)
	ref.observe(zero)
	got, want := requestFamilies(t, m.reg), requestFamilies(t, ref.reg)
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d differs:\n got  %s\n want %s", i, gl[i], wl[i])
			}
		}
		t.Fatalf("%d lines, want %d", len(gl), len(wl))
	}
	if len(want) < 10_000 {
		t.Fatalf("the comparison covered only %d bytes", len(want))
	}
}

// TestHistogramBounds: a duration of a bound's nanoseconds is counted
// in that bound's bucket and one nanosecond more in the next, as the
// float comparison of Prometheus' le does.
func TestHistogramBounds(t *testing.T) {
	for _, bounds := range [][]float64{latencyBuckets[:], overheadBuckets[:]} {
		ns := nanosBounds(bounds)
		for i, b := range bounds {
			for _, d := range []int64{ns[i] - 1, ns[i], ns[i] + 1} {
				var h histogram
				h.observe(d, ns)
				want := len(bounds) // +Inf
				for j, bb := range bounds {
					if float64(d)/1e9 <= bb {
						want = j
						break
					}
				}
				if h.counts[want].Load() != 1 {
					t.Errorf("bound %g: %d ns not in bucket %d", b, d, want)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a bound of a fraction of a nanosecond was taken")
		}
	}()
	nanosBounds([]float64{1e-10})
}

// TestRequestSeriesCountExactly: requests observed from many goroutines
// come out exact at scrape time.
func TestRequestSeriesCountExactly(t *testing.T) {
	m := New()
	concurrently(8, 500, func() {
		m.Observe(&RequestObs{Project: "qa", Model: "chat", Provider: "up", Route: "/v1/chat/completions", Code: 200,
			Took: time.Millisecond, Overhead: 100 * time.Microsecond, PromptTokens: 3, CostMicros: 7})
	})
	wantSeries(t, scrape(t, m),
		`gatehouse_requests_total{code="200",error_kind="",model="chat",route="/v1/chat/completions"} 4000`,
		`gatehouse_tokens_total{model="chat",project="qa",provider="up",type="prompt"} 12000`,
		`gatehouse_cost_usd_total{model="chat",project="qa",provider="up"} 0.028`,
		`gatehouse_request_duration_seconds_bucket{model="chat",route="/v1/chat/completions",le="0.001"} 4000`,
		`gatehouse_request_duration_seconds_sum{model="chat",route="/v1/chat/completions"} 4`,
		`gatehouse_overhead_seconds_bucket{route="/v1/chat/completions",le="0.0001"} 4000`)
}
