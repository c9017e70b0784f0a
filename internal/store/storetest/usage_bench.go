package storetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
	"gatehouse/internal/reqid"
)

// BenchSink measures how many usage records a second a Sink sustains
// into s: b.N records are added as fast as a caller can, then Close waits
// until every one is stored. It reports records/s; none may spill.
func BenchSink(b *testing.B, s auth.Store) {
	rs, ok := s.(account.RecordStore)
	if !ok {
		b.Fatalf("%T does not implement account.RecordStore", s)
	}
	sink, err := account.NewSink(rs, account.SinkOptions{SpillDir: b.TempDir(), Queue: max(b.N, 1)})
	if err != nil {
		b.Fatal(err)
	}
	base := time.Now().UTC()
	recs := make([]account.Record, b.N)
	for i := range recs {
		at := base.Add(time.Duration(i) * 200 * time.Microsecond) // 5,000 requests a second
		recs[i] = account.Record{RequestID: reqid.New(at), Time: at,
			Endpoint: "/v1/chat/completions", KeyID: "key_bench", ProjectID: "proj_bench", Project: "bench", Model: "chat",
			ServedModel: "gpt-4o-mini", Provider: "openai", Deployment: "openai/gpt-4o-mini", Status: 200, PromptTokens: 120,
			CompletionTokens: 300, Cost: 1234, UsageSource: account.SourceReported, LatencyMS: 812.5, TTFTMS: 95.1,
			OverheadMS: 0.21, Cache: account.CacheBypass, Attempts: 1}
	}
	b.ResetTimer()
	start := time.Now()
	for i := range recs {
		sink.Add(recs[i])
	}
	if err := sink.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.StopTimer()
	if sink.Spilled() != 0 || sink.Written() != uint64(b.N) {
		b.Fatalf("written %d spilled %d of %d", sink.Written(), sink.Spilled(), b.N)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "records/s")
}

// BenchRecords is how many records the usage-query benchmarks fill a
// store with: the ten million, spread over 30 days (one every
// 259.2 ms); GATEHOUSE_BENCH_RECORDS makes a smaller run for a quick look.
func BenchRecords(b *testing.B) int {
	if s := os.Getenv("GATEHOUSE_BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			b.Fatalf("GATEHOUSE_BENCH_RECORDS=%q: want a count of at least 1000", s)
		}
		return n
	}
	return 10_000_000
}

// The synthetic records' shape, shared by the stores' fill statements:
// record i is at BenchEnd - i*span/n, of key_(i%500), project p(i%50),
// customer c(i%5000), one of 8 models and 5 providers; every 50th is a
// 429.
const (
	BenchKeys      = 500
	BenchProjects  = 50
	BenchCustomers = 5000
)

// BenchEnd is the newest synthetic record's time.
var BenchEnd = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// BenchUsageQueries times the usage API's queries over a store filled
// with BenchRecords(b) records ending at BenchEnd.
func BenchUsageQueries(b *testing.B, q account.Querier, n int) {
	ctx := context.Background()
	day := account.Filter{From: BenchEnd.Add(-24 * time.Hour), To: BenchEnd.Add(time.Second)}
	month := account.Filter{From: BenchEnd.Add(-30 * 24 * time.Hour), To: BenchEnd.Add(time.Second)}
	cases := []struct {
		name string
		run  func() (int, error)
	}{
		{"usage-24h", func() (int, error) { r, err := q.Usage(ctx, account.UsageQuery{Filter: day}); return len(r), err }},
		{"usage-24h-by-model", func() (int, error) {
			r, err := q.Usage(ctx, account.UsageQuery{Filter: day, GroupBy: account.GroupModel})
			return len(r), err
		}},
		{"usage-24h-by-key-hourly", func() (int, error) {
			r, err := q.Usage(ctx, account.UsageQuery{Filter: day, GroupBy: account.GroupKey, Interval: account.IntervalHour})
			return len(r), err
		}},
		{"usage-24h-one-key-hourly", func() (int, error) {
			f := day
			f.Key = "key_7"
			r, err := q.Usage(ctx, account.UsageQuery{Filter: f, Interval: account.IntervalHour})
			return len(r), err
		}},
		{"usage-1h-by-model-minutely", func() (int, error) {
			f := account.Filter{From: BenchEnd.Add(-time.Hour), To: BenchEnd.Add(time.Second)}
			r, err := q.Usage(ctx, account.UsageQuery{Filter: f, GroupBy: account.GroupModel, Interval: account.IntervalMinute})
			return len(r), err
		}},
		{"usage-30d-by-project-daily", func() (int, error) {
			r, err := q.Usage(ctx, account.UsageQuery{Filter: month, GroupBy: account.GroupProject, Interval: account.IntervalDay})
			return len(r), err
		}},
		{"usage-30d-by-customer", func() (int, error) { // from the records: the rollup has no customer
			r, err := q.Usage(ctx, account.UsageQuery{Filter: month, GroupBy: account.GroupCustomer})
			return len(r), err
		}},
		{"logs-first-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Limit: 100})
			return len(p.Records), err
		}},
		{"logs-one-key-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Filter: account.Filter{Key: "key_7"}, Limit: 100})
			return len(p.Records), err
		}},
		{"logs-one-project-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Filter: account.Filter{Project: "p7"}, Limit: 100})
			return len(p.Records), err
		}},
		{"logs-one-model-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Filter: account.Filter{Model: "o3-mini"}, Limit: 100})
			return len(p.Records), err
		}},
		{"logs-one-provider-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Filter: account.Filter{Provider: "groq"}, Limit: 100})
			return len(p.Records), err
		}},
		{"logs-one-customer-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Filter: account.Filter{Customer: "c17"}, Limit: 100})
			return len(p.Records), err
		}},
		{"logs-429s-page", func() (int, error) {
			p, err := q.Logs(ctx, account.LogQuery{Filter: account.Filter{Status: 429}, Limit: 100})
			return len(p.Records), err
		}},
		{"record-by-id", func() (int, error) {
			_, err := q.Record(ctx, fmt.Sprintf("gh-%d", n/2))
			return 1, err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if got, err := c.run(); err != nil || got == 0 {
					b.Fatalf("%d rows, %v", got, err)
				}
			}
		})
	}
}
