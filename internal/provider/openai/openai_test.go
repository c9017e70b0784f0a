package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

func deployment() *provider.Deployment {
	return &provider.Deployment{Provider: "up", Model: "gpt-4o-mini-2024-07-18", BaseURL: "http://up.test/v1",
		APIKey: "sk-provider", StreamUsage: true, Header: http.Header{"X-Extra": {"1"}}}
}

func chatReq(t *testing.T, body string) *llm.ChatRequest {
	t.Helper()
	r, err := llm.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestChatRequestRewritesAndAuthenticates(t *testing.T) {
	req := chatReq(t, `{"model":"alias","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	up, err := Adapter{}.ChatRequest(context.Background(), deployment(), req)
	if err != nil {
		t.Fatal(err)
	}
	if up.URL.String() != "http://up.test/v1/chat/completions" || up.Method != http.MethodPost {
		t.Fatalf("url %s %s", up.Method, up.URL)
	}
	if got := up.Header.Get("Authorization"); got != "Bearer sk-provider" {
		t.Fatalf("authorization %q", got)
	}
	if up.Header.Get("X-Extra") != "1" || up.Header.Get("Accept") != "text/event-stream" {
		t.Fatalf("headers %v", up.Header)
	}
	body, _ := io.ReadAll(up.Body)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("upstream body is not JSON: %s", body)
	}
	want := map[string]any{"model": "gpt-4o-mini-2024-07-18", "stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []any{map[string]any{"role": "user", "content": "hi"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("upstream body (-want +got):\n%s", d)
	}
	if up.ContentLength != int64(len(body)) {
		t.Fatalf("content length %d for %d bytes", up.ContentLength, len(body))
	}
}

func streamResponse(r io.Reader) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(r)}
}

func collect(t *testing.T, s llm.Stream) ([]string, []llm.Chunk, error) {
	t.Helper()
	var datas []string
	var chunks []llm.Chunk
	for {
		c, err := s.Next()
		if err != nil {
			return datas, chunks, err
		}
		datas = append(datas, string(c.Data))
		chunks = append(chunks, c)
	}
}

func TestStreamHidesGatewayUsagePlumbing(t *testing.T) {
	fixture, err := os.ReadFile("testdata/stream_with_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	for _, clientWantsUsage := range []bool{false, true} {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if clientWantsUsage {
			body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		req := chatReq(t, body)
		// One byte at a time: the parser must not depend on read sizes.
		st, _ := Adapter{}.Stream(streamResponse(iotest.OneByteReader(bytes.NewReader(fixture))), deployment(), req)
		datas, chunks, err := collect(t, st)
		if err != io.EOF {
			t.Fatalf("stream ended with %v, want io.EOF", err)
		}
		if len(chunks) != 4 {
			t.Fatalf("got %d chunks", len(chunks))
		}
		for i, d := range datas[:3] {
			has := strings.Contains(d, `"usage":null`)
			if has != clientWantsUsage {
				t.Errorf("include_usage=%v chunk %d usage:null present=%v: %s", clientWantsUsage, i, has, d)
			}
			if !json.Valid([]byte(d)) {
				t.Errorf("chunk %d not valid JSON after edit: %s", i, d)
			}
		}
		last := chunks[3]
		if !last.UsageOnly || last.Usage == nil {
			t.Fatalf("last chunk not marked as usage-only: %+v", last)
		}
		want := llm.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11, CachedTokens: 4, ReasoningTokens: 1}
		if d := cmp.Diff(want, *last.Usage); d != "" {
			t.Fatalf("usage (-want +got):\n%s", d)
		}
		// The place for the cost came with it: the relay need not walk
		// the chunk again to put it there.
		got := llm.SetUsageCostAt([]byte(datas[3]), last.UsageSlot, "0.5")
		if wantCost, _ := llm.SetUsageCost([]byte(datas[3]), "0.5"); last.UsageSlot.End == 0 || string(got) != string(wantCost) {
			t.Errorf("usage slot %+v puts the cost as %s, want %s", last.UsageSlot, got, wantCost)
		}
	}
}

func TestStreamWithoutDoneIsBroken(t *testing.T) {
	req := chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	in := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
	st, _ := Adapter{}.Stream(streamResponse(strings.NewReader(in)), deployment(), req)
	_, chunks, err := collect(t, st)
	if len(chunks) != 1 || err != io.ErrUnexpectedEOF {
		t.Fatalf("chunks=%d err=%v, want 1 chunk then unexpected EOF", len(chunks), err)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	req := chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	in := "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"code\":\"overloaded\"}}\n\n"
	st, _ := Adapter{}.Stream(streamResponse(strings.NewReader(in)), deployment(), req)
	_, _, err := collect(t, st)
	ge, ok := err.(*llm.Error)
	if !ok || ge.Message != "overloaded" || ge.Code != "overloaded" {
		t.Fatalf("got %v", err)
	}
}

func TestStreamMalformedEvent(t *testing.T) {
	req := chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	st, _ := Adapter{}.Stream(streamResponse(strings.NewReader("data: {nope\n\n")), deployment(), req)
	_, _, err := collect(t, st)
	if ge, ok := err.(*llm.Error); !ok || ge.Status != http.StatusBadGateway {
		t.Fatalf("got %v, want 502", err)
	}
}

// TestStreamEventNotAnObject: an event that is JSON but no object is the
// provider's fault, and neither the message nor the logged cause calls it
// a request body.
func TestStreamEventNotAnObject(t *testing.T) {
	req := chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	st, _ := Adapter{}.Stream(streamResponse(strings.NewReader("data: [1,2]\n\n")), deployment(), req)
	_, _, err := collect(t, st)
	ge, ok := err.(*llm.Error)
	if !ok || ge.Kind != llm.KindUpstreamProtocol || !strings.Contains(ge.Message, "JSON but not an object") || strings.Contains(ge.Error(), "request") {
		t.Fatalf("got %v, want a protocol error about the event, not a request", err)
	}
}

func TestCompletionReadsUsage(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}
	c, err := Adapter{}.Completion(resp, deployment(), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Body) != body || !c.HasUsage || c.Usage.TotalTokens != 7 {
		t.Fatalf("got %+v", c)
	}
	resp = &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("not json"))}
	if _, err := (Adapter{}).Completion(resp, deployment(), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)); err == nil {
		t.Fatal("non-JSON body accepted")
	}
}

// A 200 that is not a whole completion is an upstream failure the router
// may retry elsewhere, never a body relayed to the client.
func TestCompletionRefusesBrokenOr200Errors(t *testing.T) {
	whole := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	for _, tt := range []struct {
		name, body string
		kind       llm.ErrorKind
		message    string
	}{
		{"cut after the usage", whole[:len(whole)-1], llm.KindUpstreamProtocol, `provider "up" sent a response that is not valid JSON`},
		{"cut mid-string", whole[:40], llm.KindUpstreamProtocol, `provider "up" sent a response that is not valid JSON`},
		{"an array", `[` + whole + `]`, llm.KindUpstreamProtocol, `provider "up" sent a response that is JSON but not an object`},
		{"null", `null`, llm.KindUpstreamProtocol, `provider "up" sent a response that is JSON but not an object`},
		{"a string", `"hi"`, llm.KindUpstreamProtocol, `provider "up" sent a response that is JSON but not an object`},
		{"an object and more", whole + `{}`, llm.KindUpstreamProtocol, `provider "up" sent a response that is not valid JSON`},
		{"empty", ``, llm.KindUpstreamProtocol, `provider "up" sent a response that is not valid JSON`},
		{"error object", `{"error":{"message":"the model failed","type":"server_error","param":null,"code":null}}`, llm.KindUpstreamStatus, "the model failed"},
		{"error string", `{"error":"model crashed"}`, llm.KindUpstreamStatus, "model crashed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tt.body))}
			_, err := Adapter{}.Completion(resp, deployment(), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`))
			e, ok := err.(*llm.Error)
			if !ok || e.Kind != tt.kind || e.Status != http.StatusBadGateway || e.Message != tt.message {
				t.Fatalf("got %#v, want a 502 %s saying %q", err, tt.kind, tt.message)
			}
		})
	}
	// An embedding list or a completion that merely mentions "error" passes.
	for _, ok := range []string{whole, `{"object":"list","data":[],"error":null}`, `{"choices":[],"error":{"message":"partial"}}`} {
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(ok))}
		if _, err := (Adapter{}).Completion(resp, deployment(), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestCutMember(t *testing.T) {
	cases := map[string]string{
		`{"a":1,"usage":null}`:            `{"a":1}`,
		`{"usage":null,"a":1}`:            `{"a":1}`,
		`{"a":1, "usage" : null , "b":2}`: `{"a":1 , "b":2}`,
		`{"usage":null}`:                  `{}`,
	}
	for in, want := range cases {
		b := []byte(in)
		var at, end int
		_ = llm.EachField(b, func(k string, v []byte, off int) bool {
			if k == "usage" {
				at, end = off, off+len(v)
			}
			return true
		})
		got := string(cutMember(b, at, end))
		if got != want {
			t.Errorf("cutMember(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestPresets(t *testing.T) {
	for _, p := range []string{"groq", "together", "deepseek", "xai", "mistral", "openrouter", "fireworks", "vllm", "lmstudio", "llama.cpp"} {
		u, ok := PresetBaseURL(p)
		if !ok || !strings.HasPrefix(u, "http") {
			t.Errorf("preset %s: %q %v", p, u, ok)
		}
	}
	if _, ok := PresetBaseURL("nope"); ok {
		t.Error("unknown preset accepted")
	}
}

func TestNullUsageChunkFastPath(t *testing.T) {
	for _, tc := range []struct {
		in        string
		strip     bool
		want      string
		fastTaken bool
	}{
		{`{"id":"a","choices":[],"usage":null}`, true, `{"id":"a","choices":[]}`, true},
		{`{"id":"a","choices":[],"usage":null}`, false, `{"id":"a","choices":[],"usage":null}`, true},
		{`{"id":"a","choices":[], "usage": null}`, true, "", false},                    // not compact: full scan
		{`{"id":"a","usage":null,"error":{"message":"x"}}`, true, "", false},           // errors always scanned
		{`{"id":"a","usage":{"prompt_tokens":1},"x":{"usage":null}}`, true, "", false}, // a real usage object
	} {
		got, ok := quickChunk([]byte(tc.in), tc.strip)
		if ok != tc.fastTaken || (ok && string(got) != tc.want) {
			t.Errorf("quickChunk(%s, %v) = %s, %v; want %s, %v", tc.in, tc.strip, got, ok, tc.want, tc.fastTaken)
		}
	}
}
