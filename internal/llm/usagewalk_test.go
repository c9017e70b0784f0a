package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The references below are how the gateway read a non-streamed answer
// before CheckUsage did it in one walk: EachField over the body noting
// its usage members, ParseUsage over the first, and an EachField over
// the last usage object to find its "cost". CheckUsage must give what
// they give, on any input.

// refCheckUsage is CheckUsage made of the older walks; end is 0 when
// there is no usage object to edit.
func refCheckUsage(body []byte) (u Usage, ok bool, start, end int, err error) {
	var first []byte
	found := false
	err = EachField(body, func(key string, v []byte, off int) bool {
		if key != "usage" {
			return true
		}
		if !found {
			first, found = v, true
		}
		if KindOf(v) == KindObject {
			start, end = off, off+len(v)
		}
		return true
	})
	if err != nil {
		start, end = 0, 0
	}
	u, ok = ParseUsage(first)
	return u, ok, start, end, err
}

// refSetUsageCostAt is SetUsageCostAt made of the older walk of the
// usage object at body[uStart:uEnd].
func refSetUsageCostAt(body []byte, uStart, uEnd int, cost string) []byte {
	cStart, cEnd := -1, -1
	empty := true
	_ = EachField(body[uStart:uEnd], func(key string, v []byte, off int) bool {
		empty = false
		if key == "cost" {
			cStart, cEnd = uStart+off, uStart+off+len(v)
		}
		return true
	})
	out := make([]byte, 0, len(body)+len(cost)+9)
	if cStart >= 0 {
		return append(append(append(out, body[:cStart]...), cost...), body[cEnd:]...)
	}
	end := uEnd - 1
	for end > uStart && body[end] != '}' {
		end--
	}
	out = append(out, body[:end]...)
	if !empty {
		out = append(out, ',')
	}
	return append(append(append(out, `"cost":`...), cost...), body[end:]...)
}

// refSetUsageCost is SetUsageCost as it was: EachField noting the last
// usage object, then refSetUsageCostAt.
func refSetUsageCost(body []byte, cost string) ([]byte, bool) {
	start, end := 0, 0
	err := EachField(body, func(key string, v []byte, off int) bool {
		if key == "usage" && KindOf(v) == KindObject {
			start, end = off, off+len(v)
		}
		return true
	})
	if err != nil || end == 0 {
		return body, false
	}
	return refSetUsageCostAt(body, start, end, cost), true
}

// checkAgainstRef fails t when CheckUsage, or the cost edit its slot
// drives, differs from the references on body.
func checkAgainstRef(t *testing.T, body []byte) {
	t.Helper()
	u, ok, slot, err := CheckUsage(body)
	wu, wok, wStart, wEnd, werr := refCheckUsage(body)
	if u != wu || ok != wok {
		t.Fatalf("%q: CheckUsage reads %+v, %v; the references %+v, %v", body, u, ok, wu, wok)
	}
	if !reflect.DeepEqual(err, werr) {
		t.Fatalf("%q: CheckUsage says %v; EachField %v", body, err, werr)
	}
	want, wantOK := body, false
	if wEnd > 0 {
		want, wantOK = refSetUsageCostAt(body, wStart, wEnd, "0.5"), true
	}
	got, gotOK := body, false
	if slot.End > 0 {
		got, gotOK = SetUsageCostAt(body, slot, "0.5"), true
	}
	if gotOK != wantOK || !bytes.Equal(got, want) {
		t.Fatalf("%q: the slot's edit gives %q, %v; the references %q, %v", body, got, gotOK, want, wantOK)
	}
	if w, wOK := refSetUsageCost(body, "0.5"); wOK != wantOK || !bytes.Equal(w, want) {
		t.Fatalf("%q: the references disagree: %q, %v and %q, %v", body, w, wOK, want, wantOK)
	}
	if got, gotOK = SetUsageCost(body, "0.5"); gotOK != wantOK || !bytes.Equal(got, want) {
		t.Fatalf("%q: SetUsageCost gives %q, %v; the references %q, %v", body, got, gotOK, want, wantOK)
	}
}

// usageWalkCases are the corners of the rules CheckUsage keeps.
var usageWalkCases = []string{
	mockAnswer,
	`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4}}`,
	`{"usage":{}, "id":"x"}`,
	`{"usage" : { "total_tokens" : 7 } }`,
	`{"usage":{"prompt_tokens":1,"cost":9.5,"x":1}}`,
	`{"usage":{"cost":1,"cost":2}}`,                             // the last cost is replaced
	`{"usage":{"co\u0073t":1}}`,                                 // an escaped key is the same key
	`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`, // read the first, edit the last
	`{"usage":{"prompt_tokens":1},"usage":null}`,                // a later non-object is not edited
	`{"usage":null,"usage":{"prompt_tokens":2}}`,                // the first is null: no usage, yet an object to edit
	`{"usage":{"a":1},"us\u0061ge":{"b":2}}`,                    // an escaped top-level key
	`{"usage":{"prompt_tokens":1.5}}`,                           // not an integer
	`{"usage":{"prompt_tokens":1e2}}`,                           // nor this
	`{"usage":{"prompt_tokens":"1"}}`,                           // nor a string
	`{"usage":{"prompt_tokens":null,"completion_tokens":2}}`,    // null leaves zero
	`{"usage":{"prompt_tokens":1,"prompt_tokens":null}}`,        // and leaves the earlier value
	`{"usage":{"prompt_tokens":1,"prompt_tokens":2}}`,           // the last value wins
	`{"usage":{"prompt_tokens":-3,"completion_tokens":99999999999999999999}}`,
	`{"usage":{"prompt_tokens":1,"total_tokens":0,"completion_tokens":2}}`,
	`{"usage":{"prompt_tokens_details":null,"completion_tokens_details":{}}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":5},"prompt_tokens_details":null}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":5},"prompt_tokens_details":{}}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":5,"cached_tokens":null}}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":"5"}}}`,
	`{"usage":{"prompt_tokens_details":[1]}}`,
	`{"usage":{"completion_tokens_details":{"reasoning_tokens":7,"x":{"reasoning_tokens":"no"}}}}`,
	`{"usage":{"prompt_tokens":"x"},"usage":{"cost":1}}`,
	`{"usage":{"prompt_tokens":1},"choices":[}`, // malformed after the usage: counts kept, no slot
	`{"usage":{"prompt_tokens":1,"x":[}`,        // malformed inside it
	`{"usage":{"prompt_tokens_details":{"cached_tokens":1,}}}`,
	`{"usage":{"prompt_tokens":1}`, `{"usage":{"prompt_tokens":1}} x`,
	`{"usage":[{"prompt_tokens":1}]}`, `{"usage":7}`, `{"usage":`, `{"usage"}`,
	`{"id":"x"}`, `{}`, ` {} `, `[1]`, `null`, ``, ` `, `"usage"`, `{"usage":{"prompt_tokens":1}}}`,
}

// mockAnswer is mockllm's non-streamed answer, the one the benchmarks
// send.
const mockAnswer = `{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from mockllm, the gatehouse test upstream. You said: Say <hi> & \"bye\" 👋","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":15,"completion_tokens":14,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_6d7a0c9f31"}`

func TestCheckUsageAgrees(t *testing.T) {
	for _, in := range usageWalkCases {
		checkAgainstRef(t, []byte(in))
	}
}

func TestCheckUsage(t *testing.T) {
	body := []byte(`{"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1},"cost":0.25}}`)
	u, ok, slot, err := CheckUsage(body)
	want := Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, CachedTokens: 2, ReasoningTokens: 1}
	if err != nil || !ok || u != want {
		t.Fatalf("CheckUsage = %+v, %v, %v; want %+v", u, ok, err, want)
	}
	cost := bytes.Index(body, []byte("0.25"))
	if wantSlot := (UsageSlot{Start: len(`{"usage":`), End: len(body) - 1, CostStart: cost, CostEnd: cost + 4}); slot != wantSlot {
		t.Errorf("slot = %+v, want %+v", slot, wantSlot)
	}
	// The nesting limit holds inside the usage object as anywhere else:
	// there the details' members are at depth 3, so 510 arrays reach the
	// limit, and 511 go past it.
	deep := func(n int) []byte {
		return []byte(`{"usage":{"prompt_tokens_details":{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`)
	}
	if _, _, _, err := CheckUsage(deep(maxDepth - 2)); err != nil {
		t.Errorf("usage nested to the limit: %v", err)
	}
	var se *SyntaxError
	if _, _, _, err := CheckUsage(deep(maxDepth - 1)); !errors.As(err, &se) {
		t.Errorf("usage nested past the limit: err = %v, want a syntax error", err)
	}
	checkAgainstRef(t, deep(maxDepth-2))
	checkAgainstRef(t, deep(maxDepth-1))
}

func FuzzCheckUsage(f *testing.F) {
	for _, in := range usageWalkCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgainstRef(t, b)
		// CheckUsage's verdict is json.Valid's for an object (within the
		// scanner's nesting limit, past which it refuses).
		_, _, _, err := CheckUsage(b)
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		object := json.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{'
		switch {
		case object && nesting(b) <= maxDepth && err != nil:
			t.Fatalf("%q: CheckUsage refuses a JSON object: %v", b, err)
		case !object && err == nil:
			t.Fatalf("%q: CheckUsage accepts what is not a JSON object", b)
		case json.Valid(b) && !object && nesting(b) <= maxDepth && !errors.Is(err, ErrNotObject):
			t.Fatalf("%q: CheckUsage gives %v for well-formed JSON that is not an object, want ErrNotObject", b, err)
		}
	})
}

// BenchmarkCheckUsage reads mockllm's answer and puts a cost in it, as
// the gateway does for a key with limits: one walk, against the three
// walks it replaced (in the same run).
func BenchmarkCheckUsage(b *testing.B) {
	body := []byte(mockAnswer)
	b.Run("one-walk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_, ok, slot, err := CheckUsage(body)
			if err != nil || !ok {
				b.Fatal(err)
			}
			_ = SetUsageCostAt(body, slot, "0.000123")
		}
	})
	b.Run("three-walks", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_, ok, start, end, err := refCheckUsage(body)
			if err != nil || !ok {
				b.Fatal(err)
			}
			_ = refSetUsageCostAt(body, start, end, "0.000123")
		}
	})
}

// topMember is one top-level member as a walk reports it.
type topMember struct{ name, value string }

// checkChunkAgainstRef fails t when CheckChunk differs on data from
// what a stream's chunk was read with before: EachField noting the last
// "usage" member and the others, ParseUsage over that usage, and the
// older walks for the cost's place.
func checkChunkAgainstRef(t *testing.T, data []byte) {
	t.Helper()
	var got []topMember
	cu, err := CheckChunk(data, func(name, v []byte) {
		// A name's invalid UTF-8 comes as it is, where EachField's key
		// has U+FFFD for each bad byte: either way no known name matches.
		got = append(got, topMember{string([]rune(string(name))), string(v)})
	})

	var want []topMember
	var usageRaw []byte
	usageAt := -1
	werr := EachField(data, func(key string, v []byte, off int) bool {
		if key == "usage" {
			usageRaw, usageAt = v, off
		} else {
			want = append(want, topMember{key, string(v)})
		}
		return true
	})
	if !reflect.DeepEqual(err, werr) {
		t.Fatalf("%q: CheckChunk says %v; EachField %v", data, err, werr)
	}
	if err != nil {
		if cu != (ChunkUsage{}) {
			t.Fatalf("%q: CheckChunk gives %+v with its error", data, cu)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: CheckChunk passes %q; EachField %q", data, got, want)
	}
	wu, wok := ParseUsage(usageRaw)
	if cu.Usage != wu || cu.HasUsage != wok {
		t.Fatalf("%q: CheckChunk reads %+v, %v; ParseUsage %+v, %v", data, cu.Usage, cu.HasUsage, wu, wok)
	}
	wantAt, wantEnd := 0, 0
	if usageAt >= 0 {
		wantAt, wantEnd = usageAt, usageAt+len(usageRaw)
	}
	if cu.At != wantAt || cu.End != wantEnd {
		t.Fatalf("%q: CheckChunk puts the usage at %d:%d; EachField %d:%d", data, cu.At, cu.End, wantAt, wantEnd)
	}
	_, _, wStart, wEnd, _ := refCheckUsage(data)
	if (cu.Slot.End > 0) != (wEnd > 0) {
		t.Fatalf("%q: CheckChunk's slot %+v; the older walk's %d:%d", data, cu.Slot, wStart, wEnd)
	}
	if wEnd > 0 {
		if g, w := SetUsageCostAt(data, cu.Slot, "0.5"), refSetUsageCostAt(data, wStart, wEnd, "0.5"); !bytes.Equal(g, w) {
			t.Fatalf("%q: the slot's edit gives %q; the older walks %q", data, g, w)
		}
	}
}

// chunkCases add a stream's corners to usageWalkCases.
var chunkCases = []string{
	`{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}`,
	`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`, // the last is read
	`{"usage":{"prompt_tokens":1},"usage":null}`,                // the last is null: no usage, the first is edited
	`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":"x"}}`,
	`{"error":{"message":"boom"},"\u0065rror":1,"choices":[ ]}`,
}

func TestCheckChunkAgrees(t *testing.T) {
	for _, in := range append(chunkCases, usageWalkCases...) {
		checkChunkAgainstRef(t, []byte(in))
	}
}

func FuzzCheckChunk(f *testing.F) {
	for _, in := range append(chunkCases, usageWalkCases...) {
		f.Add([]byte(in))
	}
	f.Fuzz(checkChunkAgainstRef)
}

// mockUsageChunk is the last chunk of mockllm's stream when the client
// asks for usage.
const mockUsageChunk = `{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_6d7a0c9f31","choices":[],"usage":{"prompt_tokens":15,"completion_tokens":14,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`

// BenchmarkCheckChunk reads a stream's usage chunk as the OpenAI adapter
// does and puts the cost in it as the relay does: one walk, against the
// walks it replaced (EachField, ParseUsage over the usage, then
// SetUsageCost's walk of the chunk and of its usage), in the same run.
func BenchmarkCheckChunk(b *testing.B) {
	data := []byte(mockUsageChunk)
	b.Run("one-walk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			empty := false
			cu, err := CheckChunk(data, func(name, v []byte) {
				if string(name) == "choices" {
					empty = string(v) == "[]"
				}
			})
			if err != nil || !cu.HasUsage || !empty {
				b.Fatal(err)
			}
			_ = SetUsageCostAt(data, cu.Slot, "0.000123")
		}
	})
	b.Run("older-walks", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			empty := false
			var usageRaw []byte
			err := EachField(data, func(key string, v []byte, _ int) bool {
				switch key {
				case "usage":
					usageRaw = v
				case "choices":
					empty = string(v) == "[]"
				}
				return true
			})
			if _, ok := ParseUsage(usageRaw); err != nil || !ok || !empty {
				b.Fatal(err)
			}
			_, _ = refSetUsageCost(data, "0.000123")
		}
	})
}
