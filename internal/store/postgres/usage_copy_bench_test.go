package postgres

import (
	"fmt"
	"testing"
	"time"

	"gatehouse/internal/account"
)

// BenchmarkCopyRows: what encoding a batch of 1,000 records for COPY
// costs the gateway, a record at a time (ns/op is a record's).
func BenchmarkCopyRows(b *testing.B) {
	at := time.Now()
	rs := make([]account.Record, 1000)
	for i := range rs {
		rs[i] = account.Record{RequestID: fmt.Sprintf("gh-%012x%016x", at.UnixMilli(), i), Time: at.Add(time.Duration(i)),
			Endpoint: "/v1/chat/completions", KeyID: "key_1", ProjectID: "proj_1", Project: "bench",
			Model: "gpt-4o-mini", ServedModel: "gpt-4o-mini-2024-07-18", Provider: "openai", Deployment: "openai/gpt-4o-mini",
			Status: 200, PromptTokens: 75, CompletionTokens: 120, Cost: 1234, UsageSource: "reported",
			LatencyMS: 812.25, OverheadMS: 0.21, Cache: "bypass", Attempts: 1}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i += len(rs) {
		if _, err := copyRows(rs); err != nil {
			b.Fatal(err)
		}
	}
}
