package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/account"
)

// TestBatchCodecRoundTrip: every field of every record comes back as
// encoded, repeats and all.
func TestBatchCodecRoundTrip(t *testing.T) {
	rs := varied(rand.New(rand.NewPCG(21, 22)), time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC), 300, "gh-codec")
	rs[0].RequestBody, rs[0].ResponseBody, rs[0].Saved, rs[0].ReasoningTokens = "{\"a\":\"\x00\xff\"}", "data: x\n\n", 9, 4
	rs[1].Time = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) // before the epoch: a negative step
	rs[2].Cost, rs[2].Status, rs[2].ServedModel, rs[2].UsageSource = -5, 599, "srv", "estimated"
	var e batchEncoder
	e.reset()
	for i := range rs {
		e.add(&rs[i])
	}
	got, err := decodeBatch(string(e.blob()))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rs, got); diff != "" {
		t.Fatalf("decoded (-encoded +decoded):\n%s", diff)
	}
}

// FuzzDecodeBatch: whatever the bytes, decodeBatch returns records or an
// error wrapping errCorruptBatch, never panics; a valid batch with bytes
// changed still does one or the other.
func FuzzDecodeBatch(f *testing.F) {
	rs := varied(rand.New(rand.NewPCG(23, 24)), time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC), 3, "gh-fuzz")
	var e batchEncoder
	e.reset()
	for i := range rs {
		e.add(&rs[i])
	}
	f.Add(string(e.blob()))
	f.Add("")
	f.Add("\x01\x00\x00\x00\x00")
	f.Fuzz(func(t *testing.T, blob string) {
		got, err := decodeBatch(blob)
		if err != nil && !errors.Is(err, errCorruptBatch) {
			t.Fatalf("error %v does not wrap errCorruptBatch", err)
		}
		if err == nil && len(blob) >= 5 && len(got) != int(uint32(blob[1])|uint32(blob[2])<<8|uint32(blob[3])<<16|uint32(blob[4])<<24) {
			t.Fatalf("%d records decoded, the count says otherwise", len(got))
		}
		var f account.Filter
		f.Key = "key_1"
		summaryMatches([]byte(blob), &f) // must not panic either
	})
}

// BenchmarkDecodeBatch: what reading a batch of 1,000 records costs a
// reader, per record.
func BenchmarkDecodeBatch(b *testing.B) {
	rs := varied(rand.New(rand.NewPCG(25, 26)), time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC), 1000, "gh-decode")
	var e batchEncoder
	e.reset()
	for i := range rs {
		e.add(&rs[i])
	}
	blob := string(e.blob())
	b.ReportAllocs()
	b.SetBytes(int64(len(blob)))
	for b.Loop() {
		if _, err := decodeBatch(blob); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeBatch: what encoding costs the writer, per batch of
// 1,000 records.
func BenchmarkEncodeBatch(b *testing.B) {
	rs := varied(rand.New(rand.NewPCG(25, 26)), time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC), 1000, "gh-encode")
	var e batchEncoder
	b.ReportAllocs()
	for b.Loop() {
		e.reset()
		for i := range rs {
			e.add(&rs[i])
		}
		e.sum.appendTo(nil)
	}
}

// BenchmarkEncodeRequestPath: what encoding costs the writer per batch
// of 200 records shaped as the request path's benchmark makes them (one
// key calling one model: every string but the request id the very one
// of the record before, no labels, no bodies), the writer's share of
// cmd/gatehouse's BenchmarkRequestPath.
func BenchmarkEncodeRequestPath(b *testing.B) {
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rs := make([]account.Record, 200)
	for i := range rs {
		rs[i] = account.Record{RequestID: fmt.Sprintf("01JDXK4Q9ZP3N6W8R2T5V7Y0B%05d", i), Time: at.Add(time.Duration(i) * 1130 * time.Microsecond),
			Endpoint: "/v1/chat/completions", KeyID: "key_1", ProjectID: "proj_1", Project: "bench", Model: "chat",
			ServedModel: "gpt-4o-mini", Provider: "openai", Deployment: "openai/gpt-4o-mini", Status: 200,
			PromptTokens: 84, CompletionTokens: 12, Cost: 20, UsageSource: account.SourceReported,
			LatencyMS: 1.25 + float64(i%7), OverheadMS: 0.08, Cache: "bypass", Attempts: 1}
	}
	var e batchEncoder
	b.ReportAllocs()
	for b.Loop() {
		e.reset()
		for i := range rs {
			e.add(&rs[i])
		}
	}
}
