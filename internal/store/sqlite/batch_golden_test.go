package sqlite

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gatehouse/internal/account"
)

// goldenBatch is the SHA-256 of goldenRecords' batch blob followed by its
// summary, as the encoder of main at b7a43ac wrote them.
const goldenBatch = "11415989898cb736c5d006f2c2724bf2e12653165af7ffa3e059d4a722c336b7"

// goldenRecords: varied records, then hand-made ones for the paths those
// miss (every string field set and repeated, one label, three labels,
// NaN floats, a negative status and attempts, time running backwards).
func goldenRecords() []account.Record {
	rs := varied(rand.New(rand.NewPCG(41, 42)), time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC), 300, "gh-golden")
	full := account.Record{RequestID: "gh-full", Time: time.Date(2026, 11, 28, 6, 0, 0, 1000, time.UTC), Endpoint: "/v1/messages",
		KeyID: "key_x", ProjectID: "proj_x", Project: "px", Customer: "cus-x", Model: "m", ServedModel: "m-2026", Provider: "anthropic",
		Deployment: "anthropic/m-2026", Status: 200, ErrorKind: "upstream_status", PromptTokens: 1 << 20, CompletionTokens: 7,
		CachedTokens: 3, ReasoningTokens: 9, Cost: -5, Saved: 12, UsageSource: "provider", LatencyMS: 12.5, TTFTMS: math.NaN(),
		OverheadMS: 0.25, Cache: "miss", Attempts: 2, Stream: true, Labels: map[string]string{"a": "1"},
		RequestBody: `{"model":"m"}`, ResponseBody: "{}"}
	again := full
	again.RequestID, again.Labels, again.Status, again.Attempts = "gh-again", map[string]string{"z": "", "b": "2", "c": "3"}, -1, -4
	again.Time = full.Time.Add(-time.Hour)
	return append(rs, full, again, full)
}

// TestBatchEncodingUnchanged: the encoder writes the very bytes it wrote
// before its appends became functions of a local slice (and any later
// change to the encoding must change batchVersion, not this hash).
func TestBatchEncodingUnchanged(t *testing.T) {
	rs := goldenRecords()
	var e batchEncoder
	e.reset()
	for i := range rs {
		e.add(&rs[i])
	}
	h := sha256.New()
	h.Write(e.blob())
	h.Write(e.sum.appendTo(nil))
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenBatch {
		t.Fatalf("batch hash %s, want %s", got, goldenBatch)
	}
}
