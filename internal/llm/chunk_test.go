package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// jsonChunk is StreamChunk as encoding/json decodes it: the reference
// DecodeStreamChunk is held to.
type jsonChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int             `json:"index"`
		Delta        Delta           `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
}

func (j *jsonChunk) stream() StreamChunk {
	c := StreamChunk{Model: j.Model}
	if j.Choices != nil {
		c.Choices = []StreamChoice{}
	}
	for _, ch := range j.Choices {
		c.Choices = append(c.Choices, StreamChoice{Index: ch.Index, Delta: ch.Delta, FinishReason: ch.FinishReason, StopReason: ch.StopReason})
	}
	return c
}

// sameAsJSON decodes data both ways and says how they differ ("" when
// they agree: both fail, or both give the same chunk).
func sameAsJSON(data []byte) string {
	var ref jsonChunk
	refErr := json.Unmarshal(data, &ref)
	got := StreamChunk{Choices: make([]StreamChoice, 0, 1)}
	err := DecodeStreamChunk(data, &got)
	if (refErr == nil) != (err == nil) {
		return "encoding/json: " + errString(refErr) + "; DecodeStreamChunk: " + errString(err)
	}
	if err != nil {
		return ""
	}
	want := ref.stream()
	if len(got.Choices) == 0 && len(want.Choices) == 0 {
		got.Choices, want.Choices = nil, nil // empty and absent read alike
	}
	for _, c := range []StreamChunk{got, want} { // empty and absent read alike
		for i := range c.Choices {
			ch := &c.Choices[i]
			if len(ch.StopReason) == 0 {
				ch.StopReason = nil
			}
			if len(ch.Delta.ToolCalls) == 0 {
				ch.Delta.ToolCalls = nil
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		return "DecodeStreamChunk " + string(g) + ", encoding/json " + string(w)
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// streamFixtures are the data lines of every SSE fixture in the tree's
// testdata: chunks as real servers write them.
func streamFixtures(t testing.TB) [][]byte {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../provider/*/testdata/*.sse", "../messages/testdata/streams/*.openai.sse", "../responses/testdata/streams/*.openai.sse"} {
		more, _ := filepath.Glob(pattern)
		files = append(files, more...)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"choices"`) {
				out = append(out, []byte(d))
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("only %d fixture chunks found", len(out))
	}
	return out
}

func TestDecodeStreamChunkAgreesWithEncodingJSON(t *testing.T) {
	cases := [][]byte{
		[]byte(`{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi \u00e9\"\\n"},"finish_reason":null}]}`),
		[]byte(` {"choices":[{"index":1,"delta":{"content":null,"refusal":"no"},"finish_reason":"stop","stop_reason":"<end>"}]} `),
		[]byte(`{"choices":[{"delta":{"reasoning_content":"think","reasoning_signature":"sig"}}]}`),
		[]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},null]}}]}`),
		[]byte(`{"choices":null,"model":null}`),
		[]byte(`{"choices":[null,{"index":2}]}`),
		[]byte(`{"choices":[],"usage":{"prompt_tokens":1}}`),
		[]byte(`{"choices":[{"delta":{"role":"a"},"delta":{"content":"merged"}}]}`),
		[]byte(`null`),
		// Errors both ways.
		[]byte(`{"choices":[{"index":"0"}]}`),
		[]byte(`{"choices":[{"index":1.5}]}`),
		[]byte(`{"model":5}`),
		[]byte(`{"choices":{}}`),
		[]byte(`{"choices":[{"delta":[]}]}`),
		[]byte(`{"choices":[{"delta":{"tool_calls":[{"function":"f"}]}}]}`),
		[]byte(`{"choices":[`),
		[]byte(`[]`),
		[]byte(`{"model":"m"} x`),
		[]byte(``),
	}
	cases = append(cases, streamFixtures(t)...)
	for _, c := range cases {
		if msg := sameAsJSON(c); msg != "" {
			t.Errorf("%s\n  %s", c, msg)
		}
	}
}

// FuzzDecodeStreamChunk holds DecodeStreamChunk to encoding/json on any
// input whose keys are the canonical ones (no escapes, no case variants,
// no repeats: where encoding/json's matching rules go further than
// servers do).
func FuzzDecodeStreamChunk(f *testing.F) {
	for _, c := range streamFixtures(f) {
		f.Add(c)
	}
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}}]},"finish_reason":"tool_calls"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c StreamChunk
		err := DecodeStreamChunk(data, &c) // never panics
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if !canonicalKeys(data) {
			return
		}
		if msg := sameAsJSON(data); msg != "" {
			t.Fatalf("%q: %s", data, msg)
		}
	})
}

// canonicalKeys says every object in data has lower-case keys without
// escapes, none repeated.
func canonicalKeys(data []byte) bool {
	if !json.Valid(data) {
		return true // both must fail: comparable
	}
	var walk func(v []byte) bool
	walk = func(v []byte) bool {
		switch KindOf(v) {
		case KindObject:
			seen := map[string]bool{}
			w := Walk(v, '{')
			for k, f, ok := w.Next(); ok; k, f, ok = w.Next() {
				key := string(k)
				if seen[key] || strings.ContainsAny(key, `\ABCDEFGHIJKLMNOPQRSTUVWXYZ`) || strings.ContainsFunc(key, func(r rune) bool { return r > 127 }) {
					return false
				}
				seen[key] = true
				if !walk(f) {
					return false
				}
			}
		case KindArray:
			w := Walk(v, '[')
			for _, e, ok := w.Next(); ok; _, e, ok = w.Next() {
				if !walk(e) {
					return false
				}
			}
		}
		return true
	}
	return walk(bytes.TrimSpace(data))
}

func BenchmarkDecodeStreamChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c jsonChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeStreamChunk", func(b *testing.B) {
		b.ReportAllocs()
		var c StreamChunk
		for b.Loop() {
			if err := DecodeStreamChunk(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
