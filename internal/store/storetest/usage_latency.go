package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
)

// testUsageLatency holds a store's latency histograms to the records
// (CheckLatency) for windows read from the rollup alone, from the records
// alone, and from both (partial hours at the edges), grouped or not, by
// hour or by minute; and the rollup's answers to the records' own.
func testUsageLatency(t *testing.T, s auth.Store) {
	w := s.(account.RecordStore)
	q := s.(account.Querier)
	ctx := ctxFor(t)
	day := time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 11))
	var recs []account.Record
	// 600 requests from 00:30 to 03:00, one every 15 s: key_b's three
	// times slower than key_a's; two streams in three, a seventh of them
	// without a first token; the non-streamed ones carry a ttft that must
	// not count.
	for i := range 600 {
		key := []string{"key_a", "key_b"}[i%2]
		lat := math.Exp(rng.NormFloat64()*0.7 + math.Log(600))
		if key == "key_b" {
			lat *= 3
		}
		r := account.Record{RequestID: fmt.Sprintf("gh-lat%03d", i), Time: day.Add(30*time.Minute + time.Duration(i)*15*time.Second),
			KeyID: key, Project: "alpha", ProjectID: "proj_1", Customer: "cus", Model: []string{"chat", "chat", "embed"}[i%3],
			Provider: "openai", Status: 200, LatencyMS: lat, Stream: i%3 != 0, TTFTMS: lat * (0.05 + 0.2*rng.Float64())}
		if i%7 == 0 {
			r.TTFTMS = 0
		}
		if i%50 == 0 {
			r.Status, r.LatencyMS = 429, 0.2 // refusals count, below the first bound
		}
		recs = append(recs, r)
	}
	// Every bound, and the float just below it, in the hour from 01:00.
	recs = append(recs, LatencyEdgeRecords(day.Add(time.Hour))...)
	recs = append(recs, account.Record{RequestID: "gh-slow", Time: day.Add(150 * time.Minute), KeyID: "key_a",
		Project: "alpha", ProjectID: "proj_1", Customer: "cus", Model: "chat", Provider: "openai", Status: 504,
		LatencyMS: 900_000, Stream: true, TTFTMS: 700_000})
	for i := 0; i < len(recs); i += 100 {
		if err := w.WriteRecords(ctx, recs[i:min(i+100, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	// One hour and combination written by three batches: a stream, a
	// request that is not one (its batch adds no ttft, and must keep the
	// stream's), and a stream again.
	for i, stream := range []bool{true, false, true} {
		r := account.Record{RequestID: fmt.Sprintf("gh-late%d", i), Time: day.Add(2*time.Hour + time.Duration(10+i)*time.Minute),
			KeyID: "key_c", Project: "alpha", ProjectID: "proj_1", Customer: "cus", Model: "chat", Provider: "openai",
			Status: 200, LatencyMS: float64(300 * (i + 1)), Stream: stream, TTFTMS: float64(40 * (i + 1))}
		if err := w.WriteRecords(ctx, []account.Record{r}); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}

	for _, c := range []struct {
		name string
		win  account.Filter
		iv   account.Interval
	}{
		{"whole hours (rollup)", account.Filter{From: day.Add(time.Hour), To: day.Add(3 * time.Hour)}, account.IntervalNone},
		{"whole hours by hour (rollup)", account.Filter{From: day, To: day.Add(4 * time.Hour)}, account.IntervalHour},
		{"partial and whole hours", account.Filter{From: day.Add(40 * time.Minute), To: day.Add(2*time.Hour + 50*time.Minute)}, account.IntervalNone},
		{"partial and whole hours, by hour", account.Filter{From: day.Add(40 * time.Minute), To: day.Add(2*time.Hour + 50*time.Minute)}, account.IntervalHour},
		{"within an hour", account.Filter{From: day.Add(65 * time.Minute), To: day.Add(110 * time.Minute)}, account.IntervalNone},
		{"by minute", account.Filter{From: day.Add(55 * time.Minute), To: day.Add(72 * time.Minute)}, account.IntervalMinute},
		{"by minute over hours", account.Filter{From: day, To: day.Add(4 * time.Hour)}, account.IntervalMinute},
		{"one project by id, partial hours", account.Filter{From: day.Add(31 * time.Minute), To: day.Add(3 * time.Hour), Project: "proj_1"}, account.IntervalHour},
	} {
		for _, g := range []account.GroupBy{account.GroupNone, account.GroupKey, account.GroupModel} {
			// The same question with the customer every record has reads
			// the records alone: it must answer the same rows.
			name := fmt.Sprintf("%s, group %q", c.name, g)
			fromRollup := CheckLatency(t, name, q, recs, account.UsageQuery{Filter: c.win, GroupBy: g, Interval: c.iv})
			fromRecords := CheckLatency(t, name+", records only", q, recs,
				account.UsageQuery{Filter: withCustomer(c.win, "cus"), GroupBy: g, Interval: c.iv})
			if d := cmp.Diff(quantiles(fromRollup), quantiles(fromRecords)); d != "" {
				t.Fatalf("%s: rollup and records disagree (-without customer +with):\n%s", name, d)
			}
		}
	}
	// Retention takes the rollup's histograms with its sums: nothing is
	// left to answer from.
	for {
		n, err := w.PruneRecords(ctx, day.Add(4*time.Hour), 500)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	rows, err := q.Usage(ctx, account.UsageQuery{Filter: account.Filter{From: day, To: day.Add(4 * time.Hour)}, GroupBy: account.GroupKey})
	if err != nil || len(rows) != 0 {
		t.Fatalf("usage after pruning every record: %d rows (%v)", len(rows), err)
	}
}

// CheckLatency asks q the usage question uq and holds the answer's
// latency histograms to recs, the records q holds: every row has the
// buckets account.Histogram gives the records of its group and bucket
// (ttft: streamed records with a ttft above 0), and its p50 and p95 lie
// in the bucket of their sample's exact (nearest-rank) percentile. Groups
// by none, key or model; interval none, minute or hour. It returns the
// answer.
func CheckLatency(t *testing.T, name string, q account.Querier, recs []account.Record, uq account.UsageQuery) []account.UsageRow {
	t.Helper()
	rows, err := q.Usage(ctxFor(t), uq)
	if err != nil {
		t.Fatal(err)
	}
	get := map[account.GroupBy]func(account.Record) string{
		account.GroupNone: func(account.Record) string { return "" }, account.GroupKey: func(r account.Record) string { return r.KeyID },
		account.GroupModel: func(r account.Record) string { return r.Model },
	}[uq.GroupBy]
	truncate := map[account.Interval]time.Duration{account.IntervalMinute: time.Minute, account.IntervalHour: time.Hour}
	type cell struct {
		group  string
		bucket time.Time
	}
	samples := map[cell]*[2][]float64{} // latency, ttft
	want := map[cell]*[2]account.Histogram{}
	for _, r := range recs {
		if !matches(r, uq.Filter) {
			continue
		}
		k := cell{group: get(r)}
		if d, ok := truncate[uq.Interval]; ok {
			k.bucket = r.Time.Truncate(d)
		}
		if want[k] == nil {
			want[k], samples[k] = &[2]account.Histogram{}, &[2][]float64{}
		}
		want[k][0].Add(r.LatencyMS)
		samples[k][0] = append(samples[k][0], r.LatencyMS)
		if r.Stream && r.TTFTMS > 0 {
			want[k][1].Add(r.TTFTMS)
			samples[k][1] = append(samples[k][1], r.TTFTMS)
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%s: %d rows, want %d", name, len(rows), len(want))
	}
	for i, row := range rows {
		k := cell{row.Group, row.Bucket}
		if want[k] == nil {
			t.Fatalf("%s: unexpected row %v", name, k)
		}
		if i > 0 && row.Bucket.Before(rows[i-1].Bucket) {
			t.Fatalf("%s: bucket %v after %v", name, row.Bucket, rows[i-1].Bucket)
		}
		if d, ok := truncate[uq.Interval]; ok && !row.Bucket.Truncate(d).Equal(row.Bucket) {
			t.Fatalf("%s: bucket %v is not on the %v", name, row.Bucket, d)
		}
		for m, h := range []account.Histogram{row.Latency, row.TTFT} {
			metric := []string{"latency", "ttft"}[m]
			if d := cmp.Diff(bucketCounts(want[k][m]), bucketCounts(h)); d != "" {
				t.Fatalf("%s, %v: %s buckets (-records +store):\n%s", name, k, metric, d)
			}
			xs := slices.Sorted(slices.Values(samples[k][m]))
			for _, p := range []float64{0.5, 0.95} {
				got, ok := h.Quantile(p)
				if len(xs) == 0 {
					if ok {
						t.Fatalf("%s, %v: %s p%v = %v without a sample", name, k, metric, p*100, got)
					}
					continue
				}
				exact := xs[max(int(math.Ceil(p*float64(len(xs))))-1, 0)]
				lo, hi := account.LatencyBucketRange(account.LatencyBucket(exact))
				if math.IsInf(hi, 1) {
					hi = lo // the last bucket reads as its lower bound
				}
				if !ok || got < lo || got > hi {
					t.Fatalf("%s, %v: %s p%v = %v, exact %v: want within its bucket [%v, %v]", name, k, metric, p*100, got, exact, lo, hi)
				}
			}
		}
	}
	return rows
}

// LatencyEdgeRecords are two records for every bound of the latency
// buckets, one at the bound and one at the float just below it, as
// latency and as ttft (streamed), from key and model "edge", ten seconds
// apart from at on; every third is not streamed, so its ttft must not
// count. Stores' SQL must bucket them exactly as Go does.
func LatencyEdgeRecords(at time.Time) []account.Record {
	var recs []account.Record
	for i, b := range account.LatencyBounds() {
		for j, v := range []float64{b, math.Nextafter(b, 0)} {
			n := 2*i + j
			recs = append(recs, account.Record{RequestID: fmt.Sprintf("gh-edge%03d-%d", i, j),
				Time: at.Add(time.Duration(n) * 10 * time.Second), KeyID: "key_edge", Project: "alpha",
				ProjectID: "proj_1", Customer: "cus", Model: "edge", Provider: "openai", Status: 200, LatencyMS: v,
				Stream: n%3 != 2, TTFTMS: v})
		}
	}
	return recs
}

func withCustomer(f account.Filter, c string) account.Filter {
	f.Customer = c
	return f
}

// bucketCounts lists a histogram's non-empty buckets.
func bucketCounts(h account.Histogram) map[int]int64 {
	m := map[int]int64{}
	for b, n := range h.Buckets() {
		m[b] = n
	}
	return m
}

// quantiles are a usage answer's percentiles, -1 where there is none.
func quantiles(rows []account.UsageRow) map[string][4]float64 {
	out := map[string][4]float64{}
	for _, r := range rows {
		var v [4]float64
		for i, h := range []account.Histogram{r.Latency, r.Latency, r.TTFT, r.TTFT} {
			p, ok := h.Quantile([]float64{0.5, 0.95}[i%2])
			if !ok {
				p = -1
			}
			v[i] = p
		}
		out[r.Group+"@"+r.Bucket.Format(time.RFC3339)] = v
	}
	return out
}
