package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
)

// BenchWriteRecords measures WriteRecords itself: b.N records in batches
// of 1,000 (the sink's default), from 20 keys to 4 models, latencies
// spread as real ones are (log-normal around 800 ms; two requests in
// three streamed, their first token log-normal around 250 ms), so each
// batch fills 80 rollup rows and a dozen latency buckets in each. It
// reports records/s.
func BenchWriteRecords(b *testing.B, s auth.Store) { BenchWriteBatches(b, s, 1000) }

// BenchWriteBatches is BenchWriteRecords with batches of size records:
// what a record costs depends on how many share a transaction (each
// commit writes a page of every b-tree it touched), and the sink's
// batches are as small as the records that arrive in one interval.
func BenchWriteBatches(b *testing.B, s auth.Store, size int) {
	rs, ok := s.(account.RecordStore)
	if !ok {
		b.Fatalf("%T does not implement account.RecordStore", s)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	base := time.Now().UTC()
	recs := make([]account.Record, b.N)
	for i := range recs {
		recs[i] = account.Record{RequestID: fmt.Sprintf("gh-wb-%d-%d", base.UnixNano(), i), Time: base.Add(time.Duration(i) * time.Millisecond),
			Endpoint: "/v1/chat/completions", KeyID: fmt.Sprintf("key_%d", i%20), ProjectID: "proj_bench", Project: "bench",
			Model: []string{"chat", "mini", "claude", "embed"}[i/20%4], ServedModel: "gpt-4o-mini", Provider: "openai",
			Deployment: "openai/gpt-4o-mini", Status: 200, PromptTokens: 120, CompletionTokens: 300, Cost: 1234,
			UsageSource: account.SourceReported, LatencyMS: math.Exp(rng.NormFloat64()*0.8 + math.Log(800)), OverheadMS: 0.21,
			Cache: account.CacheBypass, Attempts: 1, Stream: i%3 != 0}
		if recs[i].Stream {
			recs[i].TTFTMS = math.Exp(rng.NormFloat64()*0.6 + math.Log(250))
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < len(recs); i += size {
		if err := rs.WriteRecords(ctx, recs[i:min(i+size, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
