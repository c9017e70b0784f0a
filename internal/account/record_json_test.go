package account

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"gatehouse/internal/limit"
)

// marshalByReflection is how MarshalJSON wrote a record before
// AppendJSON: encoding/json over the record's wire form.
func marshalByReflection(r Record) ([]byte, error) {
	a := recordAlias(r)
	a.Time = a.Time.UTC()
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	return json.Marshal(recordJSON{recordAlias: &a, CostUSD: r.Cost.String(), SavedUSD: r.Saved.String()})
}

var trickyStrings = []string{
	"", "plain", "gh-01a226e2c0f655e67ac9d4456e19", "<script>&amp;</script>", `quote " and back \ slash`,
	"\n\r\t\b\f\x00\x01\x1f\x7f", "héllo wörld", "line\u2028sep\u2029para", "bad \xff\xfe bytes", "cut \xe2\x80",
	"surrogate \xed\xa0\x80", "emoji 😀 and 中文", "/v1/chat/completions", "openai/gpt-4o-mini", "\u00a0nbsp",
}

var trickyFloats = []float64{
	0, math.Copysign(0, -1), 1.5, 812.5, 0.21, 1e-7, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.123, -3.2e-9,
	math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3, -42,
}

func randomRecord(r *rand.Rand) Record {
	str := func() string { return trickyStrings[r.IntN(len(trickyStrings))] }
	fl := func() float64 { return trickyFloats[r.IntN(len(trickyFloats))] }
	zones := []*time.Location{time.UTC, time.FixedZone("x", -5*3600-1800), time.FixedZone("y", 14*3600)}
	rec := Record{
		RequestID: str(), Endpoint: str(), KeyID: str(), ProjectID: str(), Project: str(), Customer: str(),
		Model: str(), ServedModel: str(), Provider: str(), Deployment: str(), Status: []int{200, 0, -1, 429, 502}[r.IntN(5)],
		ErrorKind: str(), PromptTokens: r.IntN(1 << 20), CompletionTokens: r.IntN(100) - 50, CachedTokens: r.IntN(3),
		ReasoningTokens: []int{0, math.MaxInt64, math.MinInt64}[r.IntN(3)],
		Cost:            limit.Micros(r.Int64N(1<<40) - 1<<39), Saved: limit.Micros(r.IntN(3) * 1234567),
		UsageSource: str(), LatencyMS: fl(), TTFTMS: fl(), OverheadMS: fl(), Cache: str(), Attempts: r.IntN(4),
		Stream: r.IntN(2) == 0,
		Time:   time.Date(1+r.IntN(9999), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), []int{0, 1, 120000, 999999999}[r.IntN(4)], zones[r.IntN(3)]),
	}
	switch r.IntN(3) {
	case 0: // nil
	case 1:
		rec.Labels = map[string]string{}
	default:
		rec.Labels = map[string]string{}
		for range 1 + r.IntN(4) {
			rec.Labels[str()] = str()
		}
	}
	if r.IntN(3) == 0 {
		rec.RequestBody, rec.ResponseBody = str(), str()
	}
	return rec
}

// TestAppendJSONMatchesMarshal: the hand-written record is encoding/json's,
// byte for byte, over records of awkward strings (HTML, control and
// invalid bytes, line separators), floats at the edges of the exponent
// form, times in other zones and at the ends of the calendar, labels
// nil, empty and many; and what it wrote reads back the same when
// written again.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for i := range 5000 {
		rec := randomRecord(r)
		want, err := marshalByReflection(rec)
		if err != nil {
			t.Fatalf("record %d: encoding/json: %v", i, err)
		}
		got, err := rec.AppendJSON([]byte("prefix"))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got[len("prefix"):], want)
		}
		var back Record
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		// Invalid bytes read back as U+FFFD, so the second writing may
		// differ in bytes; what it says may not.
		again, _ := back.AppendJSON(nil)
		var back2 Record
		if err := json.Unmarshal(again, &back2); err != nil || !reflect.DeepEqual(back, back2) {
			t.Fatalf("record %d does not read back as itself (%v):\n%+v\n%+v", i, err, back, back2)
		}
	}
}

// TestAppendJSONWritesNaNAsZero: a latency that is not a number, which
// encoding/json refused (and with it the whole record, lost from the
// spill), is written as 0; a time encoding/json cannot write is refused.
func TestAppendJSONWritesNaNAsZero(t *testing.T) {
	rec := Record{RequestID: "gh-1", Time: time.Unix(1700000000, 0), LatencyMS: math.NaN(), TTFTMS: math.Inf(1), OverheadMS: math.Inf(-1)}
	if _, err := marshalByReflection(rec); err == nil {
		t.Fatal("encoding/json now writes NaN: the difference this test states is gone")
	}
	b, err := rec.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if back.LatencyMS != 0 || back.TTFTMS != 0 || back.OverheadMS != 0 {
		t.Errorf("read back %v %v %v, want zeros", back.LatencyMS, back.TTFTMS, back.OverheadMS)
	}
	rec.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := rec.AppendJSON(nil); err == nil {
		t.Error("a time in year 10000 was written")
	}
}

// TestMarshalJSONIsAppendJSON: other encoders of a record (the CLI, the
// admin API's exports) get the same bytes.
func TestMarshalJSONIsAppendJSON(t *testing.T) {
	rec := randomRecord(rand.New(rand.NewPCG(1, 2)))
	a, _ := json.Marshal(rec)
	b, _ := rec.AppendJSON(nil)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("json.Marshal gives\n%s\nAppendJSON\n%s", a, b)
	}
}

func BenchmarkRecordJSON(b *testing.B) {
	rec := Record{RequestID: "gh-01a226e2c0f655e67ac9d4456e19", Time: time.Now(), Endpoint: "/v1/chat/completions",
		KeyID: "key_bench", Project: "bench", Model: "gpt-4o-mini", ServedModel: "gpt-4o-mini", Provider: "mock",
		Deployment: "mock/gpt-4o-mini", Status: 200, PromptTokens: 120, CompletionTokens: 300, Cost: 1234,
		UsageSource: "reported", LatencyMS: 812.5, OverheadMS: 0.21, Cache: "bypass", Attempts: 1}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := marshalByReflection(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = rec.AppendJSON(buf[:0])
		}
	})
}

func BenchmarkRecordUnmarshal(b *testing.B) {
	rec := Record{RequestID: "gh-01a226e2c0f655e67ac9d4456e19", Time: time.Now(), Endpoint: "/v1/chat/completions",
		KeyID: "key_bench", Project: "bench", Model: "gpt-4o-mini", ServedModel: "gpt-4o-mini", Provider: "mock",
		Deployment: "mock/gpt-4o-mini", Status: 200, PromptTokens: 120, CompletionTokens: 300, Cost: 1234,
		UsageSource: "reported", LatencyMS: 812.5, OverheadMS: 0.21, Cache: "bypass", Attempts: 1}
	line, _ := rec.AppendJSON(nil)
	for b.Loop() {
		var r Record
		if err := r.UnmarshalJSON(line); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadJSONMatchesReflection: every record AppendJSON writes reads back
// the same through UnmarshalJSON (its own reader, or encoding/json when
// that declines) as through encoding/json alone; a plain record, as
// requests make them, takes the reader.
func TestReadJSONMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for i := range 5000 {
		rec := randomRecord(r)
		line, _ := rec.AppendJSON(nil)
		var got, want Record
		if err := got.UnmarshalJSON(line); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, line)
		}
		if err := want.unmarshalByReflection(line); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	plain := Record{RequestID: "gh-01a226e2c0f655e67ac9d4456e19", Time: time.Now(), Endpoint: "/v1/chat/completions",
		KeyID: "key_bench", Project: "bench", Model: "gpt-4o-mini", Provider: "mock", Status: 200, PromptTokens: 120,
		Cost: 1234, LatencyMS: 812.5, Labels: map[string]string{"team": "search"}}
	line, _ := plain.AppendJSON(nil)
	var got Record
	if !got.readJSON(line) {
		t.Fatalf("a plain record was left to encoding/json: %s", line)
	}
}

// FuzzReadJSONAgreesWithReflection: whatever readJSON reads, encoding/json
// reads too, into the same record.
func FuzzReadJSONAgreesWithReflection(f *testing.F) {
	r := rand.New(rand.NewPCG(4, 4))
	for range 20 {
		rec := randomRecord(r)
		line, _ := rec.AppendJSON(nil)
		f.Add(line)
	}
	for _, s := range []string{
		`{"request_id":"a","Request_ID":"b"}`, `{"request_id":"a","request_id":"b","status":1e2}`,
		`{"labels":{"a":"1","a":"2"},"cost_usd":"0.5"}`, `{"labels":null}`, `{"time":"2026-01-02T03:04:05.123+01:00"}`,
		`{"stream":true,"latency_ms":-0,"status":-0}`, `{"cost_usd":"1.2345678"}`, `{"labels":{"k\u00e9":"v"}}`, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Record
		if !got.readJSON(b) {
			return
		}
		var want Record
		if err := want.unmarshalByReflection(b); err != nil {
			t.Fatalf("encoding/json refuses what readJSON read: %v: %q", err, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("for %q\nreadJSON %+v\nencoding/json %+v", b, got, want)
		}
	})
}

// TestUnmarshalJSONIntoAUsedRecord: into a record that holds values
// already, UnmarshalJSON leaves what encoding/json leaves — a null field
// as it was — though readJSON declines such a line part way through.
func TestUnmarshalJSONIntoAUsedRecord(t *testing.T) {
	for _, line := range []string{
		`{"request_id":"gh-2","model":null,"status":201}`,
		`{"status":201,"model":null,"latency_ms":null,"stream":null,"request_id":"gh-2"}`,
		`{"request_id":"gh-2","labels":{"a":"1"},"customer":null}`,
	} {
		used := func() Record {
			return Record{RequestID: "gh-1", Model: "kept", Customer: "kept", Status: 200, LatencyMS: 5, Stream: true,
				Labels: map[string]string{"b": "2"}}
		}
		got, want := used(), used()
		if err := got.UnmarshalJSON([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if err := want.unmarshalByReflection([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got %+v\nwant %+v", line, got, want)
		}
	}
}
