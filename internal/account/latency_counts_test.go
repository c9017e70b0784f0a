package account

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestLatencyCountsJSON: LatencyCounts encodes the samples exactly as a
// Histogram of the same samples does (the rollup's stored histograms
// must not change with the writer's counter), for no sample, one, few
// buckets and samples across the whole range, the first and last bucket
// and values out of range included.
func TestLatencyCountsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cases := map[string][]float64{
		"none":  nil,
		"one":   {95},
		"edges": {0, -3, math.NaN(), 1e12, 600_000, 0.999, 1},
	}
	for _, spread := range []float64{2, 50, 5_000, 700_000} {
		var ms []float64
		for range 300 {
			ms = append(ms, 40+rng.Float64()*spread)
		}
		cases["spread "+strconv.FormatFloat(spread, 'g', -1, 64)] = ms
	}
	for name, ms := range cases {
		var h Histogram
		var c LatencyCounts
		for _, v := range ms {
			h.Add(v)
			c.Add(v)
		}
		if got, want := string(c.AppendJSON(nil)), string(h.AppendJSON(nil)); got != want {
			t.Errorf("%s: LatencyCounts %s, Histogram %s", name, got, want)
		}
	}
}

// BenchmarkLatencyAdd: a batch's latencies added to a Histogram and to
// LatencyCounts (the rollup's counter), and encoded once.
func BenchmarkLatencyAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ms := make([]float64, 64)
	for i := range ms {
		ms[i] = 20 + rng.Float64()*200
	}
	var buf []byte
	b.Run("Histogram", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h Histogram
			for _, v := range ms {
				h.Add(v)
			}
			buf = h.AppendJSON(buf[:0])
		}
	})
	b.Run("LatencyCounts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c LatencyCounts
			for _, v := range ms {
				c.Add(v)
			}
			buf = c.AppendJSON(buf[:0])
		}
	})
}
