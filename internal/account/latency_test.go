package account

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLatencyBounds(t *testing.T) {
	bs := LatencyBounds()
	if bs[0] != 1 || bs[len(bs)-1] != 600_000 || LatencyBuckets() != len(bs)+1 {
		t.Fatalf("bounds run %v … %v (%d buckets), want 1 ms … 10 min", bs[0], bs[len(bs)-1], LatencyBuckets())
	}
	for i := 1; i < len(bs); i++ {
		if r := bs[i] / bs[i-1]; r <= 1 || r > 1.143 {
			t.Errorf("bound %v is %.3f× the one before (%v): want ascending, at most 14.3%% apart", bs[i], r, bs[i-1])
		}
		// Written in SQL as the shortest decimal that reads back the same:
		// three significant digits at most.
		if s := strconv.FormatFloat(bs[i], 'e', -1, 64); len(s) > len("1.23e+05") {
			t.Errorf("bound %v is not a round number (%s)", bs[i], s)
		}
	}
	bs[0] = 7
	if LatencyBounds()[0] != 1 {
		t.Fatal("LatencyBounds hands out its own table")
	}
}

func TestLatencyBucket(t *testing.T) {
	bs := LatencyBounds()
	for i, b := range bs {
		if got := LatencyBucket(b); got != i+1 {
			t.Errorf("bucket of %v (a lower bound) = %d, want %d", b, got, i+1)
		}
		if got := LatencyBucket(math.Nextafter(b, 0)); got != i {
			t.Errorf("bucket of just below %v = %d, want %d", b, got, i)
		}
		lo, hi := LatencyBucketRange(i + 1)
		if lo != b || (i+1 < len(bs) && hi != bs[i+1]) || (i+1 == len(bs) && !math.IsInf(hi, 1)) {
			t.Errorf("range of bucket %d = [%v, %v)", i+1, lo, hi)
		}
	}
	for _, c := range []struct {
		ms   float64
		want int
	}{{0, 0}, {0.5, 0}, {-3, 0}, {math.NaN(), 0}, {math.Inf(1), len(bs)}, {1e9, len(bs)}, {812.5, LatencyBucket(800)}} {
		if got := LatencyBucket(c.ms); got != c.want {
			t.Errorf("bucket of %v = %d, want %d", c.ms, got, c.want)
		}
	}
}

// TestLatencyBucketOctaves: LatencyBucket starts its search at 6e+1
// bounds for a duration in [2^e, 2^(e+1)), which holds only while that
// many bounds are ≤ 2^e; and it agrees with a search of all the bounds
// at powers of two, their neighbours and random durations over the whole
// range.
func TestLatencyBucketOctaves(t *testing.T) {
	bs := LatencyBounds()
	ref := func(ms float64) int { // the number of bounds ≤ ms
		if !(ms >= bs[0]) {
			return 0
		}
		return sort.Search(len(bs), func(i int) bool { return bs[i] > ms })
	}
	for e := 0; float64(uint64(1)<<e) < bs[len(bs)-1]; e++ {
		p := float64(uint64(1) << e)
		if n := ref(p); n != 6*e+1 {
			t.Errorf("%d bounds ≤ 2^%d, want %d", n, e, 6*e+1)
		}
		for _, ms := range []float64{p, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)), 2*p - 1e-9} {
			if got, want := LatencyBucket(ms), ref(ms); got != want {
				t.Errorf("bucket of %v = %d, want %d", ms, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		ms := math.Exp(rng.Float64()*16) - 1 // 0 to ~8.9e6 ms, spread over the decades
		if got, want := LatencyBucket(ms), ref(ms); got != want {
			t.Fatalf("bucket of %v = %d, want %d", ms, got, want)
		}
	}
}

// nearestRank is the exact q-percentile of a sample: its ⌈q·n⌉-th
// smallest value.
func nearestRank(sorted []float64, q float64) float64 {
	return sorted[max(int(math.Ceil(q*float64(len(sorted))))-1, 0)]
}

func TestQuantile(t *testing.T) {
	var empty Histogram
	if _, ok := empty.Quantile(0.5); ok {
		t.Fatal("an empty histogram has a median")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	samples := map[string][]float64{
		"one sample":  {812.5},
		"two samples": {40, 3000},
		"lognormal":   nil,
		"sub-ms":      nil,
		"beyond 10 min": {
			5, 700_000, 900_000, 1_200_000,
		},
	}
	for range 10_000 {
		samples["lognormal"] = append(samples["lognormal"], math.Exp(rng.NormFloat64()*0.8+math.Log(900)))
	}
	for range 50 {
		samples["sub-ms"] = append(samples["sub-ms"], rng.Float64()*2)
	}
	for name, xs := range samples {
		var h Histogram
		for _, x := range xs {
			h.Add(x)
		}
		if h.Count() != int64(len(xs)) {
			t.Fatalf("%s: count %d, want %d", name, h.Count(), len(xs))
		}
		sorted := slices.Sorted(slices.Values(xs))
		for _, q := range []float64{0.5, 0.95, 0.99} {
			got, ok := h.Quantile(q)
			exact := nearestRank(sorted, q)
			lo, hi := LatencyBucketRange(LatencyBucket(exact))
			if math.IsInf(hi, 1) {
				hi = lo // the last bucket reads as its lower bound
			}
			if !ok || got < lo || got > hi {
				t.Errorf("%s: p%v = %v, want in [%v, %v], the bucket of the exact %v", name, q*100, got, lo, hi, exact)
			}
			// Ten thousand samples of a smooth distribution: interpolation
			// does much better than the bucket's width.
			if name == "lognormal" && math.Abs(got-exact)/exact > 0.02 {
				t.Errorf("lognormal: p%v = %.1f, exact %.1f: off by more than 2%%", q*100, got, exact)
			}
		}
	}
}

func TestHistogramMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var whole, a, b Histogram
	for i := range 2000 {
		x := rng.ExpFloat64() * 500
		whole.Add(x)
		if i%3 == 0 {
			a.Add(x)
		} else {
			b.Add(x)
		}
	}
	bBefore := slices.Collect(pairs(b))
	var m Histogram
	m.Merge(a)
	m.Merge(b)
	if d := cmp.Diff(slices.Collect(pairs(whole)), slices.Collect(pairs(m))); d != "" {
		t.Fatalf("merged halves differ from the whole (-whole +merged):\n%s", d)
	}
	if d := cmp.Diff(bBefore, slices.Collect(pairs(b))); d != "" {
		t.Fatalf("Merge changed its argument:\n%s", d)
	}
	// AddCount out of range counts at the ends; zero and negative counts
	// add nothing.
	var h Histogram
	h.AddCount(-4, 2)
	h.AddCount(10_000, 1)
	h.AddCount(7, 0)
	h.AddCount(7, -3)
	if got := slices.Collect(pairs(h)); !slices.Equal(got, [][2]int64{{0, 2}, {int64(LatencyBuckets() - 1), 1}}) {
		t.Fatalf("buckets %v", got)
	}
}

func pairs(h Histogram) func(func([2]int64) bool) {
	return func(yield func([2]int64) bool) {
		for b, n := range h.Buckets() {
			if !yield([2]int64{int64(b), n}) {
				return
			}
		}
	}
}

// TestMergeUsageHistograms: rows of the same group and bucket merge their
// histograms; others keep their own.
func TestMergeUsageHistograms(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	row := func(group string, latency ...float64) UsageRow {
		r := UsageRow{Group: group, Bucket: at, Requests: int64(len(latency))}
		for _, l := range latency {
			r.Latency.Add(l)
		}
		r.TTFT.Add(latency[0] / 10)
		return r
	}
	got := MergeUsage([]UsageRow{row("a", 100, 200)}, []UsageRow{row("b", 5), row("a", 300)})
	if len(got) != 2 || got[0].Group != "a" || got[0].Requests != 3 || got[0].Latency.Count() != 3 || got[0].TTFT.Count() != 2 ||
		got[1].Latency.Count() != 1 {
		t.Fatalf("merged %+v", got)
	}
	if p, _ := got[0].Latency.Quantile(1); p < 280 || p > 315 {
		t.Fatalf("max latency of a: %v, want in 300's bucket", p)
	}
}

// TestUsageSumsPartials: a store's partial rows add up per group and
// bucket; a bucket of -1 adds no sample.
func TestUsageSumsPartials(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var s UsageSums
	for _, p := range []UsagePartial{
		{UsageRow: UsageRow{Group: "a", Bucket: at, Requests: 3, Cost: 7}, LatencyBucket: 40, TTFTBucket: -1, Samples: 3},
		{UsageRow: UsageRow{Group: "a", Bucket: at, Requests: 2, Errors: 1}, LatencyBucket: 40, TTFTBucket: 20, Samples: 2},
		{UsageRow: UsageRow{Group: "a", Bucket: at}, LatencyBucket: -1, TTFTBucket: 22, Samples: 4},
		{UsageRow: UsageRow{Group: "b", Bucket: at, Requests: 1}, LatencyBucket: 60, TTFTBucket: -1, Samples: 1},
	} {
		s.AddPartial(&p)
	}
	got := s.Rows()
	if len(got) != 2 || got[0].Group != "a" || got[0].Requests != 5 || got[0].Errors != 1 || got[0].Cost != 7 {
		t.Fatalf("rows %+v", got)
	}
	if d := cmp.Diff([][2]int64{{40, 5}}, slices.Collect(pairs(got[0].Latency))); d != "" {
		t.Errorf("latency of a (-want +got):\n%s", d)
	}
	if d := cmp.Diff([][2]int64{{20, 2}, {22, 4}}, slices.Collect(pairs(got[0].TTFT))); d != "" {
		t.Errorf("ttft of a (-want +got):\n%s", d)
	}
	if got[1].TTFT.Count() != 0 {
		t.Errorf("b has a ttft: %+v", got[1])
	}
	var empty UsageSums
	if rows := empty.Rows(); rows == nil || len(rows) != 0 {
		t.Errorf("no rows: %#v, want an empty slice", rows)
	}
}

// TestHistogramJSON: AppendJSON's form reads back, alone, run together
// with others, and as PostgreSQL's jsonb prints it; anything else is
// refused.
func TestHistogramJSON(t *testing.T) {
	var h Histogram
	for _, ms := range []float64{0.3, 95, 95, 812.5, 1e9} {
		h.Add(ms)
	}
	js := string(h.AppendJSON(nil))
	want := `{"0":1,"40":2,"59":1,"117":1}` // 95 ms is in [90, 100), bucket 40; 812.5 in [800, 900)
	if js != want {
		t.Fatalf("AppendJSON = %s, want %s", js, want)
	}
	if got := string(Histogram{}.AppendJSON(nil)); got != "{}" {
		t.Fatalf("empty: %s", got)
	}
	var back Histogram
	if err := back.AddJSON(js + `{}{"39": 1, "60": 4}` + "{}"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([][2]int64{{0, 1}, {39, 1}, {40, 2}, {59, 1}, {60, 4}, {117, 1}}, slices.Collect(pairs(back))); d != "" {
		t.Fatalf("read back (-want +got):\n%s", d)
	}
	for _, bad := range []string{`{"a":1}`, `{"40":1,"41"}`, `{"40":-1}`, `{"40":1.5}`, `[40,1]`, `{"40":99999999999999999999}`} {
		var x Histogram
		if err := x.AddJSON(bad); err == nil {
			t.Errorf("AddJSON(%s) took it", bad)
		}
	}
}

// TestHistogramAddCountOrders: buckets added in any order — ascending,
// repeating the last, descending, at random, few and many distinct —
// count as a plain array of counts does, and stay ascending and
// positive.
func TestHistogramAddCountOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	nb := LatencyBuckets()
	for _, spread := range []int{1, 2, 3, 5, 17, nb} {
		for _, order := range []string{"ascending", "descending", "random"} {
			var h Histogram
			want := make([]int64, nb)
			for i := range 500 {
				var b int
				switch order {
				case "ascending":
					b = i * spread / 500
				case "descending":
					b = spread - 1 - i*spread/500
				default:
					b = rng.IntN(spread)
				}
				n := int64(1 + rng.IntN(3))
				h.AddCount(b, n)
				want[b] += n
			}
			got := make([]int64, nb)
			last := -1
			for b, n := range h.Buckets() {
				if b <= last || n <= 0 {
					t.Fatalf("%s over %d: bucket %d (count %d) after %d", order, spread, b, n, last)
				}
				got[b], last = n, b
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%s over %d buckets (-want +got):\n%s", order, spread, d)
			}
		}
	}
}
