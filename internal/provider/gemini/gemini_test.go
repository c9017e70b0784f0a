package gemini

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

var update = flag.Bool("update", false, "rewrite the golden request files under testdata/")

func deployment() *provider.Deployment {
	return &provider.Deployment{Provider: "gem", Type: "gemini", Model: "gemini-2.5-flash", BaseURL: DefaultBaseURL,
		APIKey: "AIza-test-key", Header: http.Header{"X-Extra": {"1"}}, Adapter: Adapter{}}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	js := http.Header{"Content-Type": {"application/json; charset=UTF-8"}}
	providertest.Run(t, providertest.Suite{
		Type:       Type(),
		Deployment: *deployment(),
		Requests: []string{
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"https://example.com/cat.JPG?size=large"}}]}],"response_format":{"type":"json_object"}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}},"reasoning_effort":"low","n":2,"seed":7}`,
		},
		Text: providertest.Fixture{Header: js, Body: fixture(t, "text.json"), Want: providertest.Want{
			Content: "Hello! How can I help you today?", Reasoning: "**Weighing the greeting**\n\nA short, friendly answer fits.",
			Finish: "stop", Usage: llm.Usage{PromptTokens: 8, CompletionTokens: 37, TotalTokens: 45, CachedTokens: 4, ReasoningTokens: 28},
		}},
		TextStream: providertest.Fixture{Header: sse, Body: fixture(t, "text_stream.sse"), Want: providertest.Want{
			Content: "The first three primes sum to 10.", Reasoning: "**Counting primes**\n\nThe sum is needed.",
			Finish: "stop", Usage: llm.Usage{PromptTokens: 28, CompletionTokens: 79, TotalTokens: 107, ReasoningTokens: 70},
		}},
		Tool: providertest.Fixture{Header: js, Body: fixture(t, "tool.json"), Want: providertest.Want{
			Content: "Checking both cities.",
			ToolCalls: []llm.ToolCall{
				{ID: "call_m5fZaJ2wLpCi1dkP9fW0gQQ_0", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_m5fZaJ2wLpCi1dkP9fW0gQQ_1", Name: "get_weather", Arguments: `{"city":"Berlin","unit":"celsius"}`},
			},
			Finish: "tool_calls", Usage: llm.Usage{PromptTokens: 61, CompletionTokens: 24, TotalTokens: 85},
		}},
		ToolStream: providertest.Fixture{Header: sse, Body: fixture(t, "tool_stream.sse"), Want: providertest.Want{
			ToolCalls: []llm.ToolCall{
				{ID: "call_WEXbaMnpF7iPjMcP27mckQE_0", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_WEXbaMnpF7iPjMcP27mckQE_1", Name: "get_time", Arguments: `{}`},
				{ID: "call_WEXbaMnpF7iPjMcP27mckQE_2", Name: "get_weather", Arguments: `{"city":"Berlin"}`},
			},
			Finish: "tool_calls", Usage: llm.Usage{PromptTokens: 28, CompletionTokens: 27, TotalTokens: 55},
		}},
		Errors: []providertest.ErrorFixture{
			{Name: "rate_limit_retry_info", Status: 429, Header: js,
				Body:       []byte(`{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}`),
				WantStatus: 429, WantMessage: "You exceeded your current quota", WantRetryAfter: 34 * time.Second},
			{Name: "rate_limit_retry_after_header", Status: 429, Header: http.Header{"Retry-After": {"7"}},
				Body:       []byte(`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`),
				WantStatus: 429, WantMessage: "Resource has been exhausted", WantRetryAfter: 7 * time.Second},
			{Name: "bad_key", Status: 400,
				Body:       []byte(`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`),
				WantStatus: 400, WantMessage: "API key not valid"},
			{Name: "not_found", Status: 404,
				Body:       []byte(`{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}`),
				WantStatus: 404, WantMessage: "models/gemini-9 is not found"},
			{Name: "overloaded", Status: 503,
				Body:       []byte(`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`),
				WantStatus: 503, WantMessage: "The model is overloaded"},
			{Name: "array_wrapped", Status: 500,
				Body:       []byte(`[{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}]`),
				WantStatus: 500, WantMessage: "An internal error has occurred."},
			{Name: "not_json", Status: 502, Body: []byte(`<html>Bad Gateway</html>`), WantStatus: 502, WantMessage: "Bad Gateway"},
		},
	})
}

func TestErrorKeepsGRPCStatusAsCode(t *testing.T) {
	resp := &http.Response{StatusCode: 429, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`))}
	e := Adapter{}.Error(resp, deployment())
	if e.Code != "RESOURCE_EXHAUSTED" || e.Type != "rate_limit_error" || e.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("got %+v", e)
	}
}

func chatReq(t *testing.T, body string) *llm.ChatRequest {
	t.Helper()
	r, err := llm.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRequestURLAndCredentials(t *testing.T) {
	for _, c := range []struct {
		model, body, url, accept string
	}{
		{"gemini-2.5-flash", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`,
			DefaultBaseURL + "/models/gemini-2.5-flash:generateContent", "application/json"},
		{"models/gemini-2.5-pro", `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			DefaultBaseURL + "/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "text/event-stream"},
		{"tunedModels/my-model", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`,
			DefaultBaseURL + "/tunedModels/my-model:generateContent", "application/json"},
	} {
		d := deployment()
		d.Model = c.model
		r, err := Adapter{}.ChatRequest(context.Background(), d, chatReq(t, c.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.Method != http.MethodPost || r.URL.String() != c.url {
			t.Errorf("%s %s, want POST %s", r.Method, r.URL, c.url)
		}
		if r.Header.Get("X-Goog-Api-Key") != "AIza-test-key" || r.Header.Get("Authorization") != "" {
			t.Errorf("credentials: %v", r.Header)
		}
		if strings.Contains(r.URL.String(), "AIza") {
			t.Errorf("the key is in the URL: %s", r.URL)
		}
		if r.Header.Get("Accept") != c.accept || r.Header.Get("X-Extra") != "1" {
			t.Errorf("headers %v", r.Header)
		}
	}
}

// goldenCases are OpenAI requests whose Gemini translation is kept under
// testdata/<name>.request.json.
var goldenCases = map[string]string{
	"kitchen_sink": providertest.KitchenSink,
	"multimodal": `{"model":"m","messages":[{"role":"user","content":[` +
		`{"type":"text","text":"Compare these."},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a/cat.webp","detail":"high"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}},` +
		`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},` +
		`{"type":"file","file":{"filename":"spec.pdf","file_data":"data:application/pdf;base64,JVBERi0x"}}]}],` +
		`"max_completion_tokens":100}`,
	"structured": `{"model":"m","messages":[{"role":"developer","content":"Reply in JSON."},{"role":"user","content":"Name a city."}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"city","strict":true,"schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}},` +
		`"reasoning_effort":"medium","n":2,"seed":42,"presence_penalty":0.5,"frequency_penalty":0.25,"stop":"END","user":"u-7","metadata":{"k":"v"}}`,
	"parallel_tools": `{"model":"m","messages":[` +
		`{"role":"system","content":"Use tools."},` +
		`{"role":"user","content":"Weather in Paris and Berlin?"},` +
		`{"role":"assistant","content":"Checking.","reasoning_content":"two calls","reasoning_signature":"c2lnLTE=","tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},` +
		`{"role":"tool","tool_call_id":"call_a","content":"{\"temp_c\":21}"},` +
		`{"role":"tool","tool_call_id":"call_b","content":"12:00"},` +
		`{"role":"user","content":"Thanks. And now?"},` +
		`{"role":"assistant","content":"Sunny."},` +
		`{"role":"user","content":"Again, tomorrow."}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"$defs":{"x":{"type":"string"}}},"strict":true}},{"type":"function","function":{"name":"get_time"}}],` +
		`"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":true}`,
	"thinking_off": `{"model":"m","messages":[{"role":"user","content":"quick"}],"reasoning_effort":"none","tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}]}`,
}

func TestRequestGolden(t *testing.T) {
	for name, body := range goldenCases {
		t.Run(name, func(t *testing.T) {
			r, err := Adapter{}.ChatRequest(context.Background(), deployment(), chatReq(t, body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r.Body)
			path := filepath.Join("testdata", name+".request.json")
			if *update {
				var pretty bytes.Buffer
				_ = json.Indent(&pretty, got, "", "  ")
				pretty.WriteByte('\n')
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("body is not JSON: %s", got)
			}
			if err := json.Unmarshal(fixture(t, name+".request.json"), &w); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("request (-golden +got); run go test -update if the change is intended:\n%s", d)
			}
		})
	}
}

func TestUnsupportedParameters(t *testing.T) {
	for _, c := range []struct{ extra, param string }{
		{`"logprobs":true`, "logprobs"},
		{`"top_logprobs":2`, "top_logprobs"},
		{`"parallel_tool_calls":false`, "parallel_tool_calls"},
		{`"logit_bias":{"50256":-100}`, "logit_bias"},
		{`"service_tier":"flex"`, "service_tier"},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],` + c.extra + `}`
		_, err := Adapter{}.ChatRequest(context.Background(), deployment(), chatReq(t, body))
		var ge *llm.Error
		if !errors.As(err, &ge) || ge.Status != 400 || ge.Param != c.param || ge.Code != "unsupported_parameter" {
			t.Errorf("%s: got %v, want a 400 naming %s", c.extra, err, c.param)
			continue
		}
		d := deployment()
		d.DropUnsupported = true
		r, err := Adapter{}.ChatRequest(context.Background(), d, chatReq(t, body))
		if err != nil {
			t.Errorf("%s with drop_unsupported: %v", c.extra, err)
			continue
		}
		sent, _ := io.ReadAll(r.Body)
		if bytes.Contains(sent, []byte(c.param)) || bytes.Contains(sent, []byte("logprob")) {
			t.Errorf("%s was not dropped: %s", c.param, sent)
		}
	}
}

func TestBadRequests(t *testing.T) {
	for _, c := range []struct{ body, param, says string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"nope","content":"x"}]}`,
			"messages[1].tool_call_id", "function name"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/img?id=3"}}]}]}`,
			"messages[0].content[0].image_url.url", "data URL"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,notbase64"}}]}]}`,
			"messages[0].content[0].image_url.url", "base64"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"messages[1].tool_calls[0].function.arguments", "JSON object"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"extreme"}`, "reasoning_effort", "extreme"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[0].file.file_id", "file ids"},
		{`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},{"role":"user","content":"x"}]}`,
			"messages[0].content[0]", "text only"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice", "tools"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"seed":9999999999}`, "seed", "32-bit"},
	} {
		_, err := Adapter{}.ChatRequest(context.Background(), deployment(), chatReq(t, c.body))
		var ge *llm.Error
		if !errors.As(err, &ge) || ge.Status != 400 || ge.Param != c.param || !strings.Contains(ge.Message, c.says) {
			t.Errorf("%s: got %v, want a 400 on %s saying %q", c.body, err, c.param, c.says)
		}
	}
}

func complete(t *testing.T, body string) *llm.ChatCompletion {
	t.Helper()
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}
	c, err := Adapter{}.Completion(resp, deployment(), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var cc llm.ChatCompletion
	if err := json.Unmarshal(c.Body, &cc); err != nil {
		t.Fatal(err)
	}
	return &cc
}

func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
		"BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
		"IMAGE_SAFETY": "content_filter", "LANGUAGE": "content_filter",
		"MALFORMED_FUNCTION_CALL": "malformed_tool_call", "UNEXPECTED_TOOL_CALL": "malformed_tool_call",
		"OTHER": "error", "FINISH_REASON_UNSPECIFIED": "error", "SOMETHING_NEW": "error",
	} {
		cc := complete(t, `{"candidates":[{"content":{"parts":[{"text":"x"}],"role":"model"},"finishReason":"`+reason+`","index":0}]}`)
		if got := cc.Choices[0].FinishReason; got != want {
			t.Errorf("%s → %q, want %q", reason, got, want)
		}
	}
}

func TestBlockedPromptIsContentFilter(t *testing.T) {
	body := `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`
	cc := complete(t, body)
	if len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "content_filter" || cc.Usage.PromptTokens != 7 {
		t.Fatalf("got %+v", cc)
	}
	st, _ := Adapter{}.Stream(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("data: " + body + "\r\n\r\n"))}, deployment(), nil)
	w := providertest.Collect(t, st)
	if w.Finish != "content_filter" || w.Usage.PromptTokens != 7 {
		t.Fatalf("stream: %+v", w)
	}
}

func TestCompletionRefusesNonsense(t *testing.T) {
	for _, body := range []string{`not json`, `{"candidates":[]}`} {
		resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}
		_, err := Adapter{}.Completion(resp, deployment(), nil)
		var ge *llm.Error
		if !errors.As(err, &ge) || ge.Status != http.StatusBadGateway {
			t.Errorf("%s: got %v, want 502", body, err)
		}
	}
}

func openStream(body string) llm.Stream {
	st, _ := Adapter{}.Stream(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, deployment(), nil)
	return st
}

func drain(s llm.Stream) ([]llm.Chunk, error) {
	var out []llm.Chunk
	for {
		c, err := s.Next()
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

func TestStreamCutOffIsAnError(t *testing.T) {
	in := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"half\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n"
	chunks, err := drain(openStream(in))
	if len(chunks) != 1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%d chunks, err %v; want 1 chunk then unexpected EOF", len(chunks), err)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	in := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n" +
		"data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n"
	_, err := drain(openStream(in))
	var ge *llm.Error
	if !errors.As(err, &ge) || ge.Status != 503 || ge.Message != "The model is overloaded." || ge.Code != "UNAVAILABLE" {
		t.Fatalf("got %v", err)
	}
	_, err = drain(openStream("data: {nope\r\n\r\n"))
	if !errors.As(err, &ge) || ge.Status != http.StatusBadGateway {
		t.Fatalf("malformed event: got %v, want 502", err)
	}
}

func TestStreamChunkShapes(t *testing.T) {
	chunks, err := drain(openStream(string(fixture(t, "tool_stream.sse"))))
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	var first llm.ChatChunk
	if err := json.Unmarshal(chunks[0].Data, &first); err != nil {
		t.Fatal(err)
	}
	d := first.Choices[0].Delta
	if d.Role != "assistant" || len(d.ToolCalls) != 2 || d.ReasoningSignature != "CiwB0e2Kb3sig==" || first.ID != "chatcmpl-WEXbaMnpF7iPjMcP27mckQE" || first.Model != "gemini-2.5-flash" {
		t.Fatalf("first chunk %s", chunks[0].Data)
	}
	last := chunks[len(chunks)-1]
	if !last.UsageOnly || last.Usage == nil || !strings.Contains(string(last.Data), `"choices":[]`) {
		t.Fatalf("last chunk %s", last.Data)
	}
}

func TestCompletionKeepsSignatureAndNullContentForCalls(t *testing.T) {
	cc := complete(t, `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"sig"}],"role":"model"},"finishReason":"STOP"}],"responseId":"r9"}`)
	m := cc.Choices[0].Message
	if m.Content != nil || m.ReasoningSignature != "sig" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_r9_0" || cc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("got %+v", m)
	}
}

func embedReq(t *testing.T, body string) *llm.EmbedRequest {
	t.Helper()
	r, err := llm.ParseEmbedRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEmbedRequest(t *testing.T) {
	d := deployment()
	d.Model = "gemini-embedding-001"
	r, err := Adapter{}.EmbedRequest(context.Background(), d, embedReq(t, `{"model":"e","input":["a","b"],"dimensions":8,"user":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.URL.String() != DefaultBaseURL+"/models/gemini-embedding-001:batchEmbedContents" || r.Header.Get("X-Goog-Api-Key") == "" {
		t.Fatalf("request %s %v", r.URL, r.Header)
	}
	body, _ := io.ReadAll(r.Body)
	want := `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]},"outputDimensionality":8},` +
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]},"outputDimensionality":8}]}`
	if string(body) != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	// (An empty input array is refused before: llm.ParseEmbedRequest.)
	for _, bad := range []string{`{"model":"e","input":[1,2,3]}`, `{"model":"e","input":"x","encoding_format":"hex"}`} {
		if _, err := (Adapter{}).EmbedRequest(context.Background(), d, embedReq(t, bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestEmbedding(t *testing.T) {
	d := deployment()
	d.Model = "gemini-embedding-001"
	upstream := `{"embeddings":[{"values":[0.5,-0.25]},{"values":[1,0]}]}`
	resp := func() *http.Response {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(upstream))}
	}
	c, err := Adapter{}.Embedding(resp(), d, embedReq(t, `{"model":"e","input":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]},{"object":"embedding","index":1,"embedding":[1,0]}],"model":"gemini-embedding-001","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`
	if string(c.Body) != want || c.HasUsage {
		t.Fatalf("got %s (usage %v)", c.Body, c.HasUsage)
	}
	c, err = Adapter{}.Embedding(resp(), d, embedReq(t, `{"model":"e","input":["a","b"],"encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 and -0.25 as little-endian float32s.
	if !strings.Contains(string(c.Body), `"embedding":"AAAAPwAAgL4="`) {
		t.Fatalf("base64: %s", c.Body)
	}
	if _, err := (Adapter{}).Embedding(resp(), d, embedReq(t, `{"model":"e","input":"only one"}`)); err == nil {
		t.Fatal("2 embeddings for 1 input accepted")
	}
}

func FuzzStream(f *testing.F) {
	for _, name := range []string{"text_stream.sse", "tool_stream.sse"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"promptFeedback\":{\"blockReason\":\"OTHER\"}}\n\n"))
	f.Add([]byte("data: {\"error\":{\"code\":429}}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := openStream(string(in))
		for range 10000 {
			c, err := s.Next()
			if err != nil {
				return
			}
			if !json.Valid(c.Data) {
				t.Fatalf("invalid chunk %s", c.Data)
			}
		}
		t.Fatal("stream never ended")
	})
}

// TestEmbeddingErrorIn200: Google's error object under a 200 is the
// provider's error with its message, not "0 embeddings for 1 inputs".
func TestEmbeddingErrorIn200(t *testing.T) {
	d := deployment()
	d.Model = "gemini-embedding-001"
	body := `{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}`
	_, err := Adapter{}.Embedding(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, d, embedReq(t, `{"model":"e","input":"a"}`))
	if e := llm.AsError(err); err == nil || e.Status < 500 || e.Message != "Internal error encountered." || e.Code != "INTERNAL" {
		t.Fatalf("got %v, want a 5xx with the provider's message and status", err)
	}
}
