package ollama

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
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

var update = flag.Bool("update", false, "rewrite the golden request files under testdata/requests")

func deployment() provider.Deployment {
	return provider.Deployment{Provider: "box", Type: "ollama", Model: "qwen3:8b", BaseURL: "http://box.test:11434",
		Adapter: Adapter{}, Header: http.Header{"X-Extra": {"1"}}}
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
	ndjson := http.Header{"Content-Type": {"application/x-ndjson"}}
	providertest.Run(t, providertest.Suite{
		Type:       Type(),
		Deployment: deployment(),
		Requests: []string{
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"reasoning_effort":"high","seed":7}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
		},
		Text: providertest.Fixture{Body: fixture(t, "text.json"), Want: providertest.Want{
			Content: "Hello! How can I help you today?", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 11, CompletionTokens: 18, TotalTokens: 29}}},
		TextStream: providertest.Fixture{Header: ndjson, Body: fixture(t, "text_stream.ndjson"), Want: providertest.Want{
			Content: "That's a fantastic question!", Reasoning: "The user greets me.", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 26, CompletionTokens: 282, TotalTokens: 308}}},
		Tool: providertest.Fixture{Body: fixture(t, "tool.json"), Want: providertest.Want{
			ToolCalls: []llm.ToolCall{
				{ID: "call_lyywui55", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_0scw2dos", Name: "get_weather", Arguments: `{"city":"London","unit":"celsius"}`}},
			Finish: "tool_calls", Usage: llm.Usage{PromptTokens: 122, CompletionTokens: 33, TotalTokens: 155}}},
		ToolStream: providertest.Fixture{Header: ndjson, Body: fixture(t, "tool_stream.ndjson"), Want: providertest.Want{
			ToolCalls: []llm.ToolCall{
				{ID: "call_0", Name: "get_current_weather", Arguments: `{"format":"celsius","location":"Paris, FR"}`},
				{ID: "call_1", Name: "get_time", Arguments: `{}`}},
			Finish: "tool_calls", Usage: llm.Usage{PromptTokens: 122, CompletionTokens: 33, TotalTokens: 155}}},
		Errors: []providertest.ErrorFixture{
			{Name: "model_not_found", Status: 404, Body: []byte(`{"error":"model \"llama9\" not found, try pulling it first"}`),
				WantStatus: 404, WantMessage: `model "llama9" not found, try pulling it first`},
			{Name: "rate_limited", Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: []byte(`{"error":"too many requests"}`),
				WantStatus: 429, WantMessage: "too many requests", WantRetryAfter: 7 * time.Second},
			{Name: "bad_request", Status: 400, Body: []byte(`{"error":"invalid format: expected \"json\" or a valid JSON schema"}`),
				WantStatus: 400, WantMessage: "invalid format"},
			{Name: "plain_text", Status: 404, Body: []byte("404 page not found"), WantStatus: 404, WantMessage: "404 page not found"},
			{Name: "server", Status: 500, Body: []byte(`{"error":"llama runner process has terminated: exit status 2"}`),
				WantStatus: 500, WantMessage: "llama runner process has terminated"},
		},
	})
}

// requestCases are translated and compared with testdata/requests/<name>.json.
var requestCases = []struct {
	name, body string
	drop       bool
}{
	{name: "kitchen_sink", body: providertest.KitchenSink},
	{name: "plain_stream", body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
	{name: "json_schema", body: `{"model":"m","messages":[{"role":"user","content":"ages"}],"max_completion_tokens":50,"max_tokens":9,` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"ages","strict":true,"schema":{"type":"object","properties":{"age":{"type":"integer"}},"required":["age"]}}}}`},
	{name: "json_object_reasoning", body: `{"model":"m","messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"hi"}],` +
		`"response_format":{"type":"json_object"},"reasoning_effort":"minimal","presence_penalty":0.5,"frequency_penalty":0.25,"seed":42,"stop":"\n"}`},
	{name: "reasoning_none", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}`},
	{name: "tool_round_trip", body: `{"model":"m","messages":[` +
		`{"role":"user","content":"Weather in Paris and London?"},` +
		`{"role":"assistant","content":"","reasoning_content":"Two cities, two calls.","tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},` +
		`{"role":"tool","tool_call_id":"call_b","content":"12:00"},` +
		`{"role":"tool","tool_call_id":"call_a","content":"{\"temp_c\":21}"},` +
		`{"role":"tool","tool_call_id":"call_unknown","content":"?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},` +
		`{"type":"function","function":{"name":"get_time","description":"Now"}}],"parallel_tool_calls":true}`},
	{name: "tool_choice_none", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`},
	{name: "images", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Compare"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"text","text":"with"},` +
		`{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ","detail":"low"}}]}]}`},
	{name: "dropped", drop: true, body: `{"model":"m","n":2,"logprobs":true,"top_logprobs":2,"logit_bias":{"1":2},"parallel_tool_calls":false,` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}},` +
		`{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}],` +
		`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`},
}

func TestRequestTranslation(t *testing.T) {
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) {
			d := deployment()
			d.DropUnsupported = c.drop
			d.APIKey = "sk-box"
			req, err := llm.ParseChatRequest([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			hr, err := Adapter{}.ChatRequest(context.Background(), &d, req)
			if err != nil {
				t.Fatalf("ChatRequest: %v", err)
			}
			if hr.Method != http.MethodPost || hr.URL.String() != "http://box.test:11434/api/chat" {
				t.Fatalf("%s %s", hr.Method, hr.URL)
			}
			wantAccept := "application/json"
			if req.Stream {
				wantAccept = "application/x-ndjson"
			}
			if hr.Header.Get("Authorization") != "Bearer sk-box" || hr.Header.Get("X-Extra") != "1" ||
				hr.Header.Get("Accept") != wantAccept || hr.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", hr.Header)
			}
			got, _ := io.ReadAll(hr.Body)
			golden := filepath.Join("testdata", "requests", c.name+".json")
			if *update {
				var pretty bytes.Buffer
				_ = json.Indent(&pretty, got, "", "  ")
				pretty.WriteByte('\n')
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("body is not JSON: %s", got)
			}
			_ = json.Unmarshal(want, &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("upstream body (-golden +got):\n%s", diff)
			}
		})
	}
}

func TestRequestRefusals(t *testing.T) {
	cases := []struct{ name, body, param string }{
		{"http image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			"messages[0].content[0].image_url.url"},
		{"data url not base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain,hello"}}]}]}`,
			"messages[0].content[0].image_url.url"},
		{"image outside user", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`,
			"messages[0].content[0]"},
		{"audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]}`,
			"messages[0].content[0].type=input_audio"},
		{"bad arguments", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments"},
		{"arguments not an object", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments"},
		{"tool_choice required", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
			"tool_choice"},
		{"tool_choice function", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
			"tool_choice"},
		{"n", `{"model":"m","messages":[{"role":"user","content":"x"}],"n":3}`, "n"},
		{"logprobs", `{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}`, "logprobs"},
		{"parallel_tool_calls false", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false}`,
			"parallel_tool_calls"},
		{"unmodelled", `{"model":"m","messages":[{"role":"user","content":"x"}],"service_tier":"flex","logit_bias":{"1":1}}`, "logit_bias"},
		{"reasoning effort", `{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"}`, "reasoning_effort"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := deployment()
			req, err := llm.ParseChatRequest([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Adapter{}.ChatRequest(context.Background(), &d, req)
			var ge *llm.Error
			if !errors.As(err, &ge) || ge.Status != http.StatusBadRequest || ge.Param != c.param {
				t.Fatalf("got %v (%+v), want a 400 naming %q", err, ge, c.param)
			}
			if ge.Message == "" || !strings.Contains(ge.Message, strings.SplitN(c.param, ".", 2)[0]) {
				t.Errorf("message does not name the parameter: %q", ge.Message)
			}
		})
	}
}

func ndjsonResponse(body string) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}}, Body: io.NopCloser(strings.NewReader(body))}
}

func drain(s llm.Stream) ([]llm.Chunk, error) {
	var out []llm.Chunk
	for {
		c, err := s.Next()
		if err != nil {
			return out, err
		}
		c.Data = bytes.Clone(c.Data)
		out = append(out, c)
	}
}

func TestStreamErrorLine(t *testing.T) {
	d := deployment()
	in := `{"model":"gemma3","created_at":"2025-10-26T17:21:21.196249Z","message":{"role":"assistant","content":" Yes"},"done":false}` + "\n" +
		`{"error":"an error was encountered while running the model"}` + "\n"
	s, _ := Adapter{}.Stream(ndjsonResponse(in), &d, nil)
	chunks, err := drain(s)
	var ge *llm.Error
	if len(chunks) != 1 || !errors.As(err, &ge) || ge.Message != "an error was encountered while running the model" || ge.Status != http.StatusBadGateway {
		t.Fatalf("chunks=%d err=%v, want one chunk then the provider's error as a 502", len(chunks), err)
	}
}

func TestStreamCutOff(t *testing.T) {
	d := deployment()
	in := `{"model":"m","created_at":"2025-10-26T17:21:21Z","message":{"role":"assistant","content":"Hi"},"done":false}` + "\n"
	s, _ := Adapter{}.Stream(ndjsonResponse(in), &d, nil)
	chunks, err := drain(s)
	if len(chunks) != 1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("chunks=%d err=%v, want 1 chunk then unexpected EOF", len(chunks), err)
	}
	s, _ = Adapter{}.Stream(ndjsonResponse("{nope\n"), &d, nil)
	if _, err := drain(s); err == nil || llm.AsError(err).Status != http.StatusBadGateway {
		t.Fatalf("malformed line: %v, want a 502", err)
	}
}

func TestStreamLengthAndNoTrailingNewline(t *testing.T) {
	d := deployment()
	in := `{"model":"m","created_at":"2025-10-26T17:21:21Z","message":{"role":"assistant","content":"a b"},"done":false}` + "\n\n" +
		`{"model":"m","created_at":"2025-10-26T17:21:22Z","message":{"role":"assistant","content":""},"done_reason":"length","done":true,"prompt_eval_count":3,"eval_count":2}`
	s, _ := Adapter{}.Stream(ndjsonResponse(in), &d, nil)
	chunks, err := drain(s)
	if err != io.EOF || len(chunks) != 3 {
		t.Fatalf("chunks=%d err=%v", len(chunks), err)
	}
	var fin llm.ChatChunk
	_ = json.Unmarshal(chunks[1].Data, &fin)
	if fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "length" {
		t.Fatalf("finish chunk %s", chunks[1].Data)
	}
	if u := chunks[2].Usage; u == nil || !chunks[2].UsageOnly || u.TotalTokens != 5 {
		t.Fatalf("usage chunk %+v", chunks[2])
	}
	var first llm.ChatChunk
	_ = json.Unmarshal(chunks[0].Data, &first)
	if first.Model != "m" || first.Created != 1761499281 || first.Choices[0].Delta.Role != "assistant" {
		t.Fatalf("first chunk %s", chunks[0].Data)
	}
}

func TestCompletionErrorAndGarbage(t *testing.T) {
	d := deployment()
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"error":"boom"}`))}
	if _, err := (Adapter{}).Completion(resp, &d, nil); err == nil || llm.AsError(err).Message != "boom" {
		t.Fatalf("got %v", err)
	}
	resp = &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`not json`))}
	if _, err := (Adapter{}).Completion(resp, &d, nil); err == nil || llm.AsError(err).Status != http.StatusBadGateway {
		t.Fatalf("got %v", err)
	}
}

func TestFinishReason(t *testing.T) {
	cases := []struct {
		reason string
		tools  bool
		want   string
	}{{"stop", false, "stop"}, {"", false, "stop"}, {"stop", true, "tool_calls"}, {"length", true, "length"}, {"load", false, "stop"}, {"cancelled", false, "cancelled"}}
	for _, c := range cases {
		if got := finishReason(c.reason, c.tools); got != c.want {
			t.Errorf("finishReason(%q, %v) = %q, want %q", c.reason, c.tools, got, c.want)
		}
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
	d.Model = "nomic-embed-text"
	hr, err := Adapter{}.EmbedRequest(context.Background(), &d, embedReq(t, `{"model":"e","input":["a","b"],"dimensions":64,"user":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	if hr.URL.String() != "http://box.test:11434/api/embed" || string(body) != `{"model":"nomic-embed-text","input":["a","b"],"dimensions":64}` {
		t.Fatalf("%s %s", hr.URL, body)
	}
	// (dimensions: 0 is refused before: llm.ParseEmbedRequest.)
	for _, bad := range []string{`{"model":"e","input":[1,2,3]}`, `{"model":"e","input":"x","encoding_format":"hex"}`, `{"model":"e","input":"x","extra":1}`} {
		if _, err := (Adapter{}).EmbedRequest(context.Background(), &d, embedReq(t, bad)); llm.AsError(err).Status != http.StatusBadRequest {
			t.Errorf("%s: got %v, want a 400", bad, err)
		}
	}
}

func TestEmbedding(t *testing.T) {
	d := deployment()
	ollamaBody := `{"model":"embeddinggemma","embeddings":[[0.010071029,-0.0017594862],[0.5,0.25]],"total_duration":14143917,"load_duration":1019500,"prompt_eval_count":8}`
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(ollamaBody))}
	c, err := Adapter{}.Embedding(resp, &d, embedReq(t, `{"model":"e","input":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.010071029,-0.0017594862]},{"object":"embedding","index":1,"embedding":[0.5,0.25]}],"model":"embeddinggemma","usage":{"prompt_tokens":8,"total_tokens":8}}`
	if string(c.Body) != want || !c.HasUsage || c.Usage.PromptTokens != 8 {
		t.Fatalf("got %s %+v", c.Body, c.Usage)
	}
	resp = &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(ollamaBody))}
	c, err = Adapter{}.Embedding(resp, &d, embedReq(t, `{"model":"e","input":["a","b"],"encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(c.Body, &out); err != nil || len(out.Data) != 2 {
		t.Fatalf("%v %s", err, c.Body)
	}
	raw, _ := base64.StdEncoding.DecodeString(out.Data[1].Embedding)
	if len(raw) != 8 || math.Float32frombits(binary.LittleEndian.Uint32(raw[4:])) != 0.25 {
		t.Fatalf("base64 embedding %q", out.Data[1].Embedding)
	}
}

// TestEmbeddingFailedWith200: Ollama's error object, or an answer without
// vectors, under a 200 is a 502 with its message, not an empty list.
func TestEmbeddingFailedWith200(t *testing.T) {
	d := deployment()
	for body, says := range map[string]string{
		`{"error":"model failed to load"}`:                 "model failed to load",
		`{"model":"embeddinggemma","prompt_eval_count":3}`: "without embeddings",
	} {
		resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}
		c, err := Adapter{}.Embedding(resp, &d, embedReq(t, `{"model":"e","input":"a"}`))
		if e := llm.AsError(err); err == nil || e.Status != http.StatusBadGateway || !strings.Contains(e.Message, says) {
			t.Errorf("%s: got %v %v; want a 502 saying %q", body, c, err, says)
		}
	}
}

func TestModels(t *testing.T) {
	d := deployment()
	hr, err := Adapter{}.ModelsRequest(context.Background(), &d)
	if err != nil || hr.Method != http.MethodGet || hr.URL.String() != "http://box.test:11434/api/tags" {
		t.Fatalf("%v %v", err, hr)
	}
	body := `{"models":[{"name":"gemma3:latest","model":"gemma3:latest","modified_at":"2025-10-03T23:34:03.409490317-07:00","size":3338801804,"digest":"a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a","details":{"format":"gguf","family":"gemma3","families":["gemma3"],"parameter_size":"4.3B","quantization_level":"Q4_K_M"}},{"model":"qwen3:8b"}]}`
	names, err := Adapter{}.Models(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, &d)
	if err != nil || !cmp.Equal(names, []string{"gemma3:latest", "qwen3:8b"}) {
		t.Fatalf("%v %v", names, err)
	}
}

// FuzzStream feeds arbitrary bytes to the NDJSON decoder: it must end with
// an error or io.EOF, never panic or loop.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text_stream.ndjson", "tool_stream.ndjson"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"error":"x"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := deployment()
		s, _ := Adapter{}.Stream(&http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(in))}, &d, nil)
		for range len(in) + 8 {
			if _, err := s.Next(); err != nil {
				return
			}
		}
		t.Fatal("stream did not end")
	})
}
