package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/providertest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func fixedNow() time.Time { return time.Unix(1700000000, 0) }

func deployment() *provider.Deployment {
	return &provider.Deployment{Provider: "claude", Type: "anthropic", Model: "claude-sonnet-4-5",
		BaseURL: "https://api.anthropic.test", APIKey: "sk-ant-test", Header: http.Header{},
		Adapter: Adapter{Now: fixedNow}}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var sseHeader = http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}

func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Suite{
		Type:       Type(),
		Deployment: *deployment(),
		Requests: []string{
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
		},
		Text: providertest.Fixture{Body: fixture(t, "text.json"), Want: providertest.Want{
			Content: "Hi! My name is Claude.", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 3595, CompletionTokens: 503, TotalTokens: 4098, CachedTokens: 1500},
		}},
		TextStream: providertest.Fixture{Header: sseHeader, Body: fixture(t, "text_stream.sse"), Want: providertest.Want{
			Content: "Hello!", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 35, CompletionTokens: 15, TotalTokens: 50, CachedTokens: 10},
		}},
		Tool: providertest.Fixture{Body: fixture(t, "tool.json"), Want: providertest.Want{
			Content: "I'll check the weather.", Finish: "tool_calls",
			ToolCalls: []llm.ToolCall{{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location":"San Francisco, CA","unit":"celsius"}`}},
			Usage:     llm.Usage{PromptTokens: 572, CompletionTokens: 89, TotalTokens: 661},
		}},
		ToolStream: providertest.Fixture{Header: sseHeader, Body: fixture(t, "tool_stream.sse"), Want: providertest.Want{
			Content: "Okay, let's check the weather", Finish: "tool_calls",
			ToolCalls: []llm.ToolCall{
				{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: `{"location":"San Francisco, CA","unit":"fahrenheit"}`},
				{ID: "toolu_02", Name: "get_time", Arguments: `{}`},
			},
			Usage: llm.Usage{PromptTokens: 472, CompletionTokens: 89, TotalTokens: 561},
		}},
		Errors: []providertest.ErrorFixture{
			{Name: "rate_limit", Status: 429, Header: http.Header{"Retry-After": {"17"}},
				Body:       []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`),
				WantStatus: 429, WantMessage: "per-minute rate limit", WantRetryAfter: 17 * time.Second},
			{Name: "overloaded", Status: 529,
				Body:       []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
				WantStatus: 529, WantMessage: "Overloaded"},
			{Name: "invalid", Status: 400,
				Body:       []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`),
				WantStatus: 400, WantMessage: "max_tokens: Field required"},
			{Name: "not_json", Status: 502, Body: []byte(`<html>bad gateway</html>`), WantStatus: 502, WantMessage: "bad gateway"},
		},
	})
}

func TestNotAnEmbedder(t *testing.T) {
	var a provider.Adapter = Adapter{}
	if _, ok := a.(provider.Embedder); ok {
		t.Fatal("Anthropic serves no embeddings: the adapter must not claim to")
	}
}

func TestChatRequestHeadersAndURL(t *testing.T) {
	d := deployment()
	d.Header.Set("Anthropic-Beta", "prompt-caching-2024-07-31")
	req := providertest.MustRequest(t, `{"model":"alias","messages":[{"role":"user","content":"hi"}]}`, true)
	r, err := Adapter{}.ChatRequest(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != http.MethodPost || r.URL.String() != "https://api.anthropic.test/v1/messages" {
		t.Fatalf("%s %s", r.Method, r.URL)
	}
	want := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Anthropic-Beta": "prompt-caching-2024-07-31",
		"Content-Type": "application/json", "Accept": "text/event-stream", "Authorization": ""}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	d.Header.Set("Anthropic-Version", "2024-01-01")
	r, _ = Adapter{}.ChatRequest(context.Background(), d, req)
	if got := r.Header.Get("Anthropic-Version"); got != "2024-01-01" {
		t.Errorf("a configured anthropic-version must win, got %q", got)
	}
}

// requestCases are OpenAI requests and the Messages request each becomes,
// in testdata/requests/<name>.json (regenerate with -update).
var requestCases = []struct {
	name string
	body string
	drop bool
}{
	{"kitchen_sink", providertest.KitchenSink, false},
	{"merge_turns", `{"model":"m","messages":[{"role":"user","content":"one"},{"role":"user","content":[{"type":"text","text":"two","cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"assistant","content":"three","tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":""}},{"id":"c2","type":"function","function":{"name":"b","arguments":" {\"x\": 1} "}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"r1"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"r2"},{"type":"image_url","image_url":{"url":"https://example.com/r2.png"}}]},` +
		`{"role":"user","content":"four"},{"role":"system","content":"late system"}],` +
		`"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}}],"parallel_tool_calls":false}`, false},
	{"tool_choice_required", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required","max_completion_tokens":100}`, false},
	{"tool_choice_function", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"a"}}}`, false},
	{"tool_choice_none", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"none","parallel_tool_calls":false}`, false},
	{"json_schema", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"answer","description":"The answer.","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},"strict":true}}}`, false},
	{"json_object_with_tools", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"a"}}]}`, false},
	{"thinking_effort", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok","reasoning_content":"I think","reasoning_signature":"sig=="},{"role":"user","content":"more"}],"reasoning_effort":"medium","temperature":1,"top_p":0.99}`, false},
	{"thinking_budget_clamped", `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","max_tokens":3000}`, false},
	{"drop_unsupported", `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2,"seed":7,"logprobs":true,"presence_penalty":0.5,"logit_bias":{"1":2},"temperature":1.7,"top_k":5,"safety_identifier":"s-1","reasoning_effort":"low"}`, true},
	{"tool_cache_control", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"},"cache_control":{"type":"ephemeral","ttl":"1h"}}]}`, false},
	{"stream_pdf", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"developer","content":[{"type":"text","text":"dev","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]}],"stop":"END","user":"u-9"}`, false},
}

func TestRequestTranslation(t *testing.T) {
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) {
			d := deployment()
			d.DropUnsupported = c.drop
			req := providertest.MustRequest(t, c.body, false)
			r, err := Adapter{}.ChatRequest(context.Background(), d, req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r.Body)
			path := filepath.Join("testdata", "requests", c.name+".json")
			if *update {
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, got, "", "  "); err != nil {
					t.Fatal(err)
				}
				pretty.WriteByte('\n')
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("body is not JSON: %s", got)
			}
			if err := json.Unmarshal(fixture(t, filepath.Join("requests", c.name+".json")), &w); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("messages request (-want +got):\n%s\ngot: %s", diff, got)
			}
		})
	}
}

func TestRequestRefusals(t *testing.T) {
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body, param string
	}{
		{"n", `{"model":"m",` + hi + `,"n":2}`, "n"},
		{"logprobs", `{"model":"m",` + hi + `,"logprobs":true}`, "logprobs"},
		{"seed", `{"model":"m",` + hi + `,"seed":1}`, "seed"},
		{"frequency_penalty", `{"model":"m",` + hi + `,"frequency_penalty":1}`, "frequency_penalty"},
		{"logit_bias", `{"model":"m",` + hi + `,"logit_bias":{"50256":-100}}`, "logit_bias"},
		{"metadata", `{"model":"m",` + hi + `,"metadata":{"k":"v"}}`, "metadata"},
		{"temperature_range", `{"model":"m",` + hi + `,"temperature":1.5}`, "temperature"},
		{"thinking_temperature", `{"model":"m",` + hi + `,"temperature":0.2,"reasoning_effort":"low"}`, "temperature"},
		{"thinking_forced_tool", `{"model":"m",` + hi + `,"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required"}`, "tool_choice"},
		{"thinking_json", `{"model":"m",` + hi + `,"reasoning_effort":"low","response_format":{"type":"json_object"}}`, "response_format"},
		{"thinking_small_max", `{"model":"m",` + hi + `,"reasoning_effort":"low","max_tokens":500}`, "max_tokens"},
		{"bad_effort", `{"model":"m",` + hi + `,"reasoning_effort":"extreme"}`, "reasoning_effort"},
		{"bad_arguments", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"{nope"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"array_arguments", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"starts_with_assistant", `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":"hello"}]}`, "messages"},
		{"only_system", `{"model":"m","messages":[{"role":"system","content":"s"}]}`, "messages"},
		{"image_type", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages[0].content[0].type"},
		{"system_image", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}]},{"role":"user","content":"hi"}]}`, "messages[0].content[0]"},
		{"json_name_clash", `{"model":"m",` + hi + `,"tools":[{"type":"function","function":{"name":"answer"}}],"response_format":{"type":"json_schema","json_schema":{"name":"answer"}}}`, "response_format.json_schema.name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := providertest.MustRequest(t, c.body, false)
			_, err := Adapter{}.ChatRequest(context.Background(), deployment(), req)
			var ge *llm.Error
			if !errors.As(err, &ge) {
				t.Fatalf("got %v, want a 400", err)
			}
			if ge.Status != http.StatusBadRequest || ge.Param != c.param {
				t.Fatalf("status %d param %q, want 400 %q: %s", ge.Status, ge.Param, c.param, ge.Message)
			}
		})
	}
}

func completion(t *testing.T, reqBody, respBody string) llm.ChatCompletion {
	t.Helper()
	req := providertest.MustRequest(t, reqBody, false)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(respBody))}
	c, err := Adapter{Now: fixedNow}.Completion(resp, deployment(), req)
	if err != nil {
		t.Fatal(err)
	}
	var cc llm.ChatCompletion
	if err := json.Unmarshal(c.Body, &cc); err != nil {
		t.Fatal(err)
	}
	return cc
}

const jsonSchemaReq = `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}}}`

func TestCompletionJSONToolIsContent(t *testing.T) {
	cc := completion(t, jsonSchemaReq, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"toolu_1","name":"answer","input":{"a": "b"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}`)
	m := cc.Choices[0].Message
	if m.Content == nil || *m.Content != `{"a":"b"}` || len(m.ToolCalls) != 0 || cc.Choices[0].FinishReason != "stop" {
		t.Fatalf("got %+v finish %q", m, cc.Choices[0].FinishReason)
	}
	if cc.Created != fixedNow().Unix() || cc.ID != "msg_1" || cc.Model != "claude-x" {
		t.Fatalf("envelope %+v", cc)
	}
}

func TestCompletionThinkingAndStopReasons(t *testing.T) {
	cases := map[string]string{"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"refusal": "content_filter", "pause_turn": "length", "model_context_window_exceeded": "length", "brand_new": "brand_new"}
	for stop, want := range cases {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"hmm","signature":"SIG"},{"type":"text","text":"ok"}],"stop_reason":"` + stop + `","usage":{"input_tokens":1,"output_tokens":1}}`
		cc := completion(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, body)
		if got := cc.Choices[0].FinishReason; got != want {
			t.Errorf("stop_reason %s → %q, want %q", stop, got, want)
		}
		m := cc.Choices[0].Message
		if m.ReasoningContent != "hmm" || m.ReasoningSignature != "SIG" || *m.Content != "ok" {
			t.Errorf("message %+v", m)
		}
	}
}

func TestCompletionNotAMessage(t *testing.T) {
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"foo":1}`))}
	_, err := Adapter{}.Completion(resp, deployment(), req)
	var ge *llm.Error
	if !errors.As(err, &ge) || ge.Status != http.StatusBadGateway {
		t.Fatalf("got %v, want 502", err)
	}
}

// TestCompletionErrorIn200: Anthropic's error object under a 200 keeps
// the provider's type and message (minus the provider's key, were it
// echoed), with Anthropic's status for the type, 5xx ones as 502.
func TestCompletionErrorIn200(t *testing.T) {
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false)
	for _, tc := range []struct {
		typ    string
		status int
	}{
		{"api_error", http.StatusBadGateway},
		{"overloaded_error", http.StatusBadGateway},
		{"rate_limit_error", http.StatusTooManyRequests},
		{"invalid_request_error", http.StatusBadRequest},
	} {
		body := `{"type":"error","error":{"type":"` + tc.typ + `","message":"the model broke; key sk-ant-test was used"},"request_id":"req_1"}`
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		_, err := Adapter{}.Completion(resp, deployment(), req)
		var ge *llm.Error
		if !errors.As(err, &ge) || ge.Kind != llm.KindUpstreamStatus || ge.Status != tc.status || ge.Type != tc.typ ||
			ge.Message != "the model broke; key [redacted] was used" {
			t.Errorf("%s: got %+v, want %d with the provider's type and message, its key redacted", tc.typ, ge, tc.status)
		}
	}
}

func stream(t *testing.T, reqBody string, sse []byte) llm.Stream {
	t.Helper()
	req := providertest.MustRequest(t, reqBody, true)
	return providertest.OpenStream(t, deployment(), req, providertest.Fixture{Header: sseHeader, Body: sse}, true)
}

func TestStreamThinking(t *testing.T) {
	s := stream(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, fixture(t, "thinking_stream.sse"))
	got := providertest.Collect(t, s)
	providertest.Compare(t, got, providertest.Want{
		Content: "27 * 453 = 12,231", Finish: "stop",
		Reasoning: "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3",
		Usage:     llm.Usage{PromptTokens: 25, CompletionTokens: 300, TotalTokens: 325},
	})
	// The signature travels too, so a client can hand the thinking back.
	s = stream(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, fixture(t, "thinking_stream.sse"))
	defer s.Close()
	var sig string
	for {
		c, err := s.Next()
		if err != nil {
			break
		}
		var ch llm.ChatChunk
		_ = json.Unmarshal(c.Data, &ch)
		for _, choice := range ch.Choices {
			sig += choice.Delta.ReasoningSignature
		}
	}
	if sig != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..." {
		t.Fatalf("signature %q", sig)
	}
}

func sseEvents(events ...string) []byte {
	var b []byte
	for _, e := range events {
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &head)
		b = llm.AppendEvent(b, head.Type, []byte(e))
	}
	return b
}

const startEvent = `{"type":"message_start","message":{"id":"msg_9","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":7,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":1}}}`

func TestStreamJSONToolIsContent(t *testing.T) {
	body := sseEvents(startEvent,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"answer","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"b\"}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":7,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":12}}`,
		`{"type":"message_stop"}`)
	got := providertest.Collect(t, stream(t, jsonSchemaReq, body))
	providertest.Compare(t, got, providertest.Want{Content: `{"a":"b"}`, Finish: "stop",
		Usage: llm.Usage{PromptTokens: 12, CompletionTokens: 12, TotalTokens: 24, CachedTokens: 3}})
}

func TestStreamErrorEvent(t *testing.T) {
	body := sseEvents(startEvent,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		`{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)
	s := stream(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, body)
	defer s.Close()
	var err error
	chunks := 0
	for err == nil {
		_, err = s.Next()
		chunks++
	}
	var ge *llm.Error
	if !errors.As(err, &ge) || ge.Status != 529 || ge.Message != "Overloaded" || ge.Type != "overloaded_error" {
		t.Fatalf("got %v after %d chunks, want the overloaded error", err, chunks)
	}
	if chunks != 3 { // role, "Hel", then the error
		t.Fatalf("%d results before the error", chunks)
	}
}

func TestStreamBroken(t *testing.T) {
	cases := map[string][]byte{
		"no_message_stop": sseEvents(startEvent, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		"malformed":       []byte("event: message_start\ndata: {nope\n\n"),
		"no_start":        sseEvents(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			s := stream(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, body)
			defer s.Close()
			var err error
			for err == nil {
				_, err = s.Next()
			}
			if errors.Is(err, io.EOF) {
				t.Fatal("a broken stream ended as if complete")
			}
		})
	}
}

// FuzzStream feeds arbitrary bytes to the stream decoder: it must end
// with an error or io.EOF, never panic or loop.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text_stream.sse", "tool_stream.sse", "thinking_stream.sse"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	req, err := llm.ParseChatRequest([]byte(jsonSchemaReq))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
		s, err := Adapter{}.Stream(resp, deployment(), req)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := 0; ; i++ {
			c, err := s.Next()
			if err != nil {
				return
			}
			if !json.Valid(c.Data) {
				t.Fatalf("chunk is not JSON: %s", c.Data)
			}
			if i > len(body)+10 {
				t.Fatal("more chunks than input bytes")
			}
		}
	})
}
