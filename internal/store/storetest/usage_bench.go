package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
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
		recs[i] = account.Record{RequestID: fmt.Sprintf("gh-bench-%d-%d", base.UnixNano(), i), Time: base.Add(time.Duration(i) * time.Millisecond),
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
