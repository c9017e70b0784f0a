package mockllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

const anthKey = "sk-ant-mock"

func anthServer(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	o.APIKey = anthKey
	s := New(o)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// anthPost sends a Messages request with Anthropic's headers; hdr
// overrides them (an empty value removes one).
func anthPost(t *testing.T, url, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	r.Header.Set("X-Api-Key", anthKey)
	r.Header.Set("Anthropic-Version", "2023-06-01")
	r.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

const (
	anthHi    = `"messages":[{"role":"user","content":"hi"}]`
	anthTools = `"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}]`
)

func TestAnthropicValidation(t *testing.T) {
	_, url := anthServer(t, Options{})
	sig := anthSignature("thought")
	cases := []struct {
		name, body string
		hdr        map[string]string
		status     int
		typ, msg   string
	}{
		{"no key", `{}`, map[string]string{"X-Api-Key": ""}, 401, "authentication_error", "x-api-key header is required"},
		{"bearer is not enough", `{}`, map[string]string{"X-Api-Key": "", "Authorization": "Bearer " + anthKey}, 401, "authentication_error", "x-api-key header is required"},
		{"bad key", `{}`, map[string]string{"X-Api-Key": "nope"}, 401, "authentication_error", "invalid x-api-key"},
		{"no version", `{}`, map[string]string{"Anthropic-Version": ""}, 400, "invalid_request_error", "anthropic-version: header is required"},
		{"not json", `{nope`, nil, 400, "invalid_request_error", "not valid JSON"},
		{"no max_tokens", `{"model":"c",` + anthHi + `}`, nil, 400, "invalid_request_error", "max_tokens: Field required"},
		{"no model", `{"max_tokens":5,` + anthHi + `}`, nil, 400, "invalid_request_error", "model: Field required"},
		{"unknown field", `{"model":"c","max_tokens":5,` + anthHi + `,"n":2}`, nil, 400, "invalid_request_error", "n: Extra inputs are not permitted"},
		{"system role", `{"model":"c","max_tokens":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, nil, 400, "invalid_request_error", `Unexpected role "system"`},
		{"starts with assistant", `{"model":"c","max_tokens":5,"messages":[{"role":"assistant","content":"a"},{"role":"user","content":"hi"}]}`, nil, 400, "invalid_request_error", `first message must use the "user" role`},
		{"not alternating", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, nil, 400, "invalid_request_error", "roles must alternate"},
		{"empty text", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, nil, 400, "invalid_request_error", "text content blocks must be non-empty"},
		{"orphan tool_result", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"r"}]}]}`, nil, 400, "invalid_request_error", "unexpected `tool_use_id`"},
		{"unanswered tool_use", `{"model":"c","max_tokens":5,` + anthTools + `,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{}},{"type":"tool_use","id":"t2","name":"get_weather","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, nil, 400, "invalid_request_error", "without `tool_result` blocks immediately after: t2"},
		{"tool_result after text", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"text","text":"t"},{"type":"tool_result","tool_use_id":"t1"}]}]}`, nil, 400, "invalid_request_error", "must come first"},
		{"bad image type", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA"}}]}]}`, nil, 400, "invalid_request_error", "media_type"},
		{"schema without type", `{"model":"c","max_tokens":5,` + anthHi + `,"tools":[{"name":"a","input_schema":{}}]}`, nil, 400, "invalid_request_error", "tools.0.input_schema.type"},
		{"no input_schema", `{"model":"c","max_tokens":5,` + anthHi + `,"tools":[{"name":"a"}]}`, nil, 400, "invalid_request_error", "tools.0.input_schema: Field required"},
		{"tool_choice unknown tool", `{"model":"c","max_tokens":5,` + anthHi + `,` + anthTools + `,"tool_choice":{"type":"tool","name":"nope"}}`, nil, 400, "invalid_request_error", "Tool 'nope' not found"},
		{"tool_choice without tools", `{"model":"c","max_tokens":5,` + anthHi + `,"tool_choice":{"type":"auto"}}`, nil, 400, "invalid_request_error", "tool_choice may only be specified"},
		{"temperature range", `{"model":"c","max_tokens":5,` + anthHi + `,"temperature":1.5}`, nil, 400, "invalid_request_error", "temperature"},
		{"thinking budget", `{"model":"c","max_tokens":2000,` + anthHi + `,"thinking":{"type":"enabled","budget_tokens":500}}`, nil, 400, "invalid_request_error", "greater than or equal to 1024"},
		{"thinking over max", `{"model":"c","max_tokens":2000,` + anthHi + `,"thinking":{"type":"enabled","budget_tokens":2000}}`, nil, 400, "invalid_request_error", "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"thinking temperature", `{"model":"c","max_tokens":3000,` + anthHi + `,"temperature":0.5,"thinking":{"type":"enabled","budget_tokens":1024}}`, nil, 400, "invalid_request_error", "`temperature` may only be set to 1"},
		{"thinking forced tool", `{"model":"c","max_tokens":3000,` + anthHi + `,` + anthTools + `,"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":1024}}`, nil, 400, "invalid_request_error", "tool_choice forces tool use"},
		{"thinking loop without thinking", `{"model":"c","max_tokens":3000,` + anthTools + `,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, nil, 400, "invalid_request_error", "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
		{"bad signature", `{"model":"c","max_tokens":3000,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"thought","signature":"forged"},{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`, nil, 400, "invalid_request_error", "Invalid `signature`"},
		{"metadata", `{"model":"c","max_tokens":5,` + anthHi + `,"metadata":{"session":"x"}}`, nil, 400, "invalid_request_error", "metadata.session"},
		{"directive names no tool", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi @mock(tool=nope)"}],` + anthTools + `}`, nil, 400, "invalid_request_error", "no tool named"},
		{"count_tokens takes no max_tokens", `{"model":"c","max_tokens":5,` + anthHi + `}`, map[string]string{"X-Path": "count"}, 400, "invalid_request_error", "max_tokens: Extra inputs"},
		{"good thinking loop", `{"model":"c","max_tokens":3000,` + anthTools + `,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"thought","signature":"` + sig + `"},{"type":"tool_use","id":"t1","name":"get_weather","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, nil, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := "/v1/messages"
			if c.hdr["X-Path"] == "count" {
				path = "/v1/messages/count_tokens"
			}
			resp, body := anthPost(t, url, path, c.body, c.hdr)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.status == 200 {
				return
			}
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.RequestID == "" {
				t.Fatalf("not Anthropic's error shape: %s", body)
			}
			if e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("error %s %q, want %s containing %q", e.Error.Type, e.Error.Message, c.typ, c.msg)
			}
			if resp.Header.Get("Request-Id") != e.RequestID {
				t.Fatalf("request-id header %q vs body %q", resp.Header.Get("Request-Id"), e.RequestID)
			}
		})
	}
}

var anthIDs = regexp.MustCompile(`(msg|toolu|req)_01[A-Za-z0-9]{21,22}`)

// anthGolden compares got, with random ids replaced, to testdata/name.
func anthGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = anthIDs.ReplaceAll(got, []byte("${1}_01ID"))
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestAnthropicGolden(t *testing.T) {
	_, url := anthServer(t, Options{Chunks: 3})
	cases := []struct{ name, body string }{
		{"anthropic_message.golden", `{"model":"claude-x","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"Hello there"}]}`},
		{"anthropic_stream.golden", `{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hello there"}]}`},
		{"anthropic_tool.golden", `{"model":"claude-x","max_tokens":100,` + anthTools + `,"messages":[{"role":"user","content":"Weather? @mock(tool=get_weather)"}]}`},
		{"anthropic_tool_stream.golden", `{"model":"claude-x","max_tokens":100,"stream":true,` + anthTools + `,"tool_choice":{"type":"tool","name":"get_weather"},"messages":[{"role":"user","content":"Weather?"}]}`},
		{"anthropic_thinking_stream.golden", `{"model":"claude-x","max_tokens":2000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"stop_sequences":["upstream"],"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := anthPost(t, url, "/v1/messages", c.body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if strings.Contains(c.body, `"stream":true`) != strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
			}
			anthGolden(t, c.name, body)
		})
	}
}

func TestAnthropicMaxTokensCutsReply(t *testing.T) {
	_, url := anthServer(t, Options{})
	_, body := anthPost(t, url, "/v1/messages", `{"model":"c","max_tokens":3,`+anthHi+`}`, nil)
	var m struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.StopReason != "max_tokens" || m.Usage.OutputTokens != 3 || m.Content[0].Text != "Hello from mockllm," {
		t.Fatalf("got %s", body)
	}
}

func TestAnthropicInjectedErrors(t *testing.T) {
	_, url := anthServer(t, Options{})
	for _, c := range []struct {
		status int
		typ    string
	}{{429, "rate_limit_error"}, {529, "overloaded_error"}, {500, "api_error"}, {404, "not_found_error"}} {
		resp, body := anthPost(t, url, "/v1/messages", `{"model":"c","max_tokens":5,`+anthHi+`}`,
			map[string]string{"X-Mock-Error-Status": itoa(c.status), "X-Mock-Retry-After": "7"})
		if resp.StatusCode != c.status || !strings.Contains(string(body), `"type":"`+c.typ+`"`) || resp.Header.Get("Retry-After") != "7" {
			t.Fatalf("status %d retry-after %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
}

func TestAnthropicModelsAndOpenAIStillServed(t *testing.T) {
	_, url := anthServer(t, Options{})
	get := func(path string, anthropic bool) (int, string) {
		r, _ := http.NewRequest(http.MethodGet, url+path, nil)
		if anthropic {
			r.Header.Set("X-Api-Key", anthKey)
			r.Header.Set("Anthropic-Version", "2023-06-01")
		} else {
			r.Header.Set("Authorization", "Bearer "+anthKey)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := get("/v1/models", true); st != 200 || !strings.Contains(b, `"type":"model","id":"claude-sonnet-4-5-20250929"`) || !strings.Contains(b, `"has_more":false`) {
		t.Fatalf("anthropic models %d %s", st, b)
	}
	if st, b := get("/v1/models/claude-haiku-4-5-20251001", true); st != 200 || !strings.Contains(b, `"display_name":"Claude Haiku 4.5"`) {
		t.Fatalf("anthropic model %d %s", st, b)
	}
	if st, b := get("/v1/models/nope", true); st != 404 || !strings.Contains(b, "not_found_error") {
		t.Fatalf("unknown model %d %s", st, b)
	}
	if st, b := get("/v1/models", false); st != 200 || !strings.Contains(b, `"object":"list"`) {
		t.Fatalf("openai models %d %s", st, b)
	}
}

// TestAnthropicSDK drives the emulator with Anthropic's official Go SDK:
// if its bytes were not what the real API sends, the SDK would say so.
func TestAnthropicSDK(t *testing.T) {
	srv, url := anthServer(t, Options{Chunks: 4})
	client := anthropic.NewClient(option.WithBaseURL(url), option.WithAPIKey(anthKey), option.WithMaxRetries(0))
	ctx := context.Background()
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris? @mock(tool=get_weather)"))},
		Tools:    []anthropic.ToolUnionParam{tool}}

	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 || msg.Content[1].Type != "tool_use" ||
		msg.Content[1].Name != "get_weather" || string(msg.Content[1].Input) != `{"city":"mock"}` || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message %+v", msg)
	}

	// The same as a stream, accumulated by the SDK.
	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	events := 0
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
		events++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != anthropic.StopReasonToolUse || len(acc.Content) != 2 || acc.Content[0].Text != msg.Content[0].Text ||
		string(acc.Content[1].Input) != `{"city":"mock"}` || acc.Usage.OutputTokens != msg.Usage.OutputTokens || acc.Usage.InputTokens != msg.Usage.InputTokens {
		t.Fatalf("accumulated %+v\nwant like %+v", acc, msg)
	}

	// Round trip: the tool result goes back, the reply quotes it.
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[1].ID, `{"temp_c":21}`, false)))
	final, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if final.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(final.Content[0].Text, `{"temp_c":21}`) {
		t.Fatalf("final %+v", final)
	}

	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5", Messages: params.Messages})
	if err != nil || count.InputTokens <= 0 {
		t.Fatalf("count %+v %v", count, err)
	}
	page, err := client.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) != len(anthDefaultModels) {
		t.Fatalf("models %+v %v", page, err)
	}

	// An Anthropic-shaped error is an *anthropic.Error to the SDK.
	_, err = client.Messages.New(ctx, params, option.WithHeader("X-Mock-Error-Status", "529"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || !strings.Contains(apiErr.Error(), "overloaded_error") {
		t.Fatalf("got %v", err)
	}
	if st := srv.Stats(); st.Errors != 1 || st.Completed < 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAnthropicStreamCancellationAndFailures(t *testing.T) {
	srv, url := anthServer(t, Options{Chunks: 8, TokensPerSecond: 20})
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"model":"c","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"tell me a long story please"}]}`
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", strings.NewReader(body))
	r.Header.Set("X-Api-Key", anthKey)
	r.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case c := <-srv.Cancelled():
		if c.Path != "/v1/messages" || c.Model != "c" {
			t.Fatalf("cancellation %+v", c)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the mock did not observe the hang-up")
	}

	// fail_after cuts the connection after that many content deltas.
	_, got := anthPostRaw(t, url, `{"model":"c","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi there @mock(fail_after=1,tps=0)"}]}`)
	if strings.Count(got, "text_delta") != 1 || strings.Contains(got, "message_stop") {
		t.Fatalf("fail_after=1 stream: %s", got)
	}
}

// anthPostRaw posts and reads what arrives until the connection ends,
// tolerating a cut connection.
func anthPostRaw(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(body))
	r.Header.Set("X-Api-Key", anthKey)
	r.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
