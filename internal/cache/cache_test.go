package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/llm"
)

func mustKey(t *testing.T, project, model, body string) Key {
	t.Helper()
	k, err := NewKey(project, model, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyCanonical(t *testing.T) {
	base := `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7}`
	k := mustKey(t, "p", "gpt", base)
	same := []string{
		// field order and whitespace
		"{ \"seed\":7,\n \"temperature\":0.5, \"messages\":[{\"content\":\"hi\", \"role\":\"user\"}], \"model\":\"a\"}",
		// spelling of a number
		`{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":5e-1,"seed":7.0}`,
		// delivery and bookkeeping fields, and the model as the client spelled it
		`{"model":"alias","stream":true,"stream_options":{"include_usage":true},"user":"u1","metadata":{"x":"y"},
		  "messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7}`,
	}
	for _, b := range same {
		if got := mustKey(t, "p", "gpt", b); got != k {
			t.Errorf("%s: key differs from %s", b, base)
		}
	}
	differ := map[string]string{
		"temperature": `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.6,"seed":7}`,
		"seed":        `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":8}`,
		"message":     `{"model":"a","messages":[{"role":"user","content":"hi!"}],"temperature":0.5,"seed":7}`,
		"tools": `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7,
			"tools":[{"type":"function","function":{"name":"f"}}]}`,
		"n":    `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7,"n":2}`,
		"stop": `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7,"stop":["x"]}`,
		"format": `{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7,
			"response_format":{"type":"json_object"}}`,
	}
	for what, b := range differ {
		if mustKey(t, "p", "gpt", b) == k {
			t.Errorf("%s changed but the key did not", what)
		}
	}
	if mustKey(t, "q", "gpt", base) == k {
		t.Error("two projects share a key")
	}
	if mustKey(t, "p", "other", base) == k {
		t.Error("two resolved models share a key")
	}
	for _, bad := range []string{`[1]`, `{"a":1} {}`, `{`} {
		if _, err := NewKey("p", "m", []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// chunks of a small stream with a tool call and usage, as an OpenAI
// backend sends them.
var streamed = []string{
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\""}}]},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
}

type sliceStream struct {
	chunks []llm.Chunk
	err    error // returned after the chunks instead of io.EOF
}

func (s *sliceStream) Next() (llm.Chunk, error) {
	if len(s.chunks) == 0 {
		if s.err != nil {
			return llm.Chunk{}, s.err
		}
		return llm.Chunk{}, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}
func (s *sliceStream) Close() error { return nil }

func upstreamChunks() []llm.Chunk {
	var cs []llm.Chunk
	for i, d := range streamed {
		c := llm.Chunk{Data: []byte(d)}
		if i == len(streamed)-1 {
			c.Usage, c.UsageOnly = &llm.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, true
		}
		cs = append(cs, c)
	}
	return cs
}

func drain(t *testing.T, s llm.Stream) []llm.Chunk {
	t.Helper()
	var out []llm.Chunk
	for {
		c, err := s.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

func TestRecorderKeepsEventsAndReplaysThemAsTheyWere(t *testing.T) {
	r := NewRecorder(&sliceStream{chunks: upstreamChunks()}, 1<<20)
	passed := drain(t, r)
	kept, ok := r.Chunks()
	if !ok || len(kept) != len(streamed) || len(passed) != len(streamed) {
		t.Fatalf("recorded %d chunks (complete %v), passed %d", len(kept), ok, len(passed))
	}
	e := &Entry{Chunks: kept}
	s, err := e.Stream()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range drain(t, s) {
		if string(c.Data) != streamed[i] {
			t.Fatalf("event %d replayed as %s, want %s", i, c.Data, streamed[i])
		}
		if (c.Usage != nil) != (i == len(streamed)-1) || c.UsageOnly != (i == len(streamed)-1) {
			t.Fatalf("event %d: usage %v usage-only %v", i, c.Usage, c.UsageOnly)
		}
	}
}

func TestRecorderKeepsNothingOfACutOffOrOversizedStream(t *testing.T) {
	r := NewRecorder(&sliceStream{chunks: upstreamChunks()[:3], err: errors.New("reset")}, 1<<20)
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	if _, ok := r.Chunks(); ok {
		t.Fatal("a stream that broke off would be stored")
	}
	r = NewRecorder(&sliceStream{chunks: upstreamChunks()}, 300)
	if n := len(drain(t, r)); n != len(streamed) {
		t.Fatalf("an oversized stream passed %d chunks, want all %d", n, len(streamed))
	}
	if _, ok := r.Chunks(); ok {
		t.Fatal("a stream over the size bound would be stored")
	}
}

func TestStreamAndCompletionConvert(t *testing.T) {
	body, err := (&Entry{Chunks: upstreamChunks()}).Body()
	if err != nil {
		t.Fatal(err)
	}
	var c llm.ChatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if c.ID != "c1" || c.Model != "m-1" || c.Object != "chat.completion" || *m.Content != "Hello" ||
		len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_1" || m.ToolCalls[0].Function.Arguments != `{"a":1}` ||
		c.Choices[0].FinishReason != "tool_calls" || c.Usage == nil || c.Usage.TotalTokens != 7 {
		t.Fatalf("assembled %s", body)
	}
	// And back: the completion as a stream assembles to the same body.
	s, err := (&Entry{Completion: body}).Stream()
	if err != nil {
		t.Fatal(err)
	}
	chunks := drain(t, s)
	last := chunks[len(chunks)-1]
	if last.Usage == nil || !last.UsageOnly || last.Usage.TotalTokens != 7 {
		t.Fatalf("last chunk %s: usage %v usage-only %v", last.Data, last.Usage, last.UsageOnly)
	}
	again, err := (&Entry{Chunks: chunks}).Body()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(body) {
		t.Fatalf("round trip\n%s\nwant\n%s", again, body)
	}
}

func TestMemoryBoundsBytesEvictsLeastRecentAndExpires(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewMemory(3*(&Entry{Project: "p", Completion: make([]byte, 100)}).Size(), func() time.Time { return now })
	put := func(k Key, project string, ttl time.Duration) {
		m.Put(k, &Entry{Project: project, Completion: make([]byte, 100), Expires: now.Add(ttl)})
	}
	put("a", "p", time.Hour)
	put("b", "p", time.Hour)
	put("c", "q", time.Minute)
	if _, ok := m.Get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	put("d", "q", time.Hour) // evicts b, the least recently used
	if _, ok := m.Get("b"); ok {
		t.Fatal("b survived eviction")
	}
	if m.Len() != 3 || m.Bytes() > m.max {
		t.Fatalf("%d entries, %d bytes of %d", m.Len(), m.Bytes(), m.max)
	}
	now = now.Add(2 * time.Minute)
	if _, ok := m.Get("c"); ok {
		t.Fatal("c outlived its ttl")
	}
	if n := m.Purge("q"); n != 1 {
		t.Fatalf("purged %d of project q, want 1 (d)", n)
	}
	if _, ok := m.Get("a"); !ok {
		t.Fatal("purging q took p's entry")
	}
	m.Put("huge", &Entry{Completion: make([]byte, 1000), Expires: now.Add(time.Hour)})
	if _, ok := m.Get("huge"); ok || m.Len() != 1 {
		t.Fatal("an entry larger than the bound was kept, or evicted the rest")
	}
}

// referenceKey is NewKey written the plain way: decode the body into Go
// values, drop the ignored fields, hash the canonical form. NewKey must
// agree with it on every body.
func referenceKey(project, model string, body []byte) (Key, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return "", err
	}
	h := sha256.New()
	writeString(h, "gatehouse-cache-v1")
	writeString(h, project)
	writeString(h, model)
	for k := range obj {
		if ignored[k] {
			delete(obj, k)
		}
	}
	writeCanonical(h, obj)
	return Key(hex.EncodeToString(h.Sum(nil))), nil
}

func TestNewKeyAgreesWithTheReference(t *testing.T) {
	bodies := []string{
		`{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"seed":7}`,
		`{"messages":[{"role":"system","content":"be \"brief\"\n\u00e9\u0041 \ud83e\udd8a"},{"role":"user","content":[{"type":"text","text":"x"}]}],
		  "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],
		  "tool_choice":"auto","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{}}},"stop":["\n","END"],
		  "n":2,"logit_bias":{"50256":-100},"top_p":1.0,"max_tokens":1e3,"big":12345678901234567890,"neg":-0.0,"nul":null,"yes":true,"no":false}`,
		`{"a":1,"a":2,"b":{"c":[1,2,{"d":"e","d":"f"}]}}`,
		"{\"bad\":\"\xff\xfe\",\"ok\":\"ünï\"}",
		`{"stream":true,"stream_options":{"include_usage":true},"user":"u","metadata":{"k":"v"},"model":"m","messages":[]}`,
		`{}`,
	}
	for _, body := range bodies {
		got, err := NewKey("p", "m", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want, err := referenceKey("p", "m", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: key %s, the reference %s", body, got, want)
		}
	}
}

// writeString (for referenceKey) writes s length-prefixed, so no two sequences of strings
// hash alike.
func writeString(h hash.Hash, s string) {
	var n [8]byte
	h.Write(strconv.AppendInt(n[:0], int64(len(s)), 10))
	h.Write([]byte{':'})
	h.Write([]byte(s))
}

// writeCanonical writes v in one spelling: objects with sorted keys,
// numbers in their shortest form, strings length-prefixed.
func writeCanonical(h hash.Hash, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h.Write([]byte{'{'})
		for _, k := range keys {
			writeString(h, k)
			writeCanonical(h, v[k])
		}
		h.Write([]byte{'}'})
	case []any:
		h.Write([]byte{'['})
		for _, e := range v {
			writeCanonical(h, e)
		}
		h.Write([]byte{']'})
	case string:
		h.Write([]byte{'s'})
		writeString(h, v)
	case json.Number:
		h.Write([]byte{'n'})
		writeString(h, canonicalNumber(v))
	case bool:
		if v {
			h.Write([]byte{'t'})
		} else {
			h.Write([]byte{'f'})
		}
	case nil:
		h.Write([]byte{'0'})
	}
}
