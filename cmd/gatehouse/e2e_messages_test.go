package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"gatehouse/internal/mockllm"
)

// These tests use the official Anthropic Go SDK against gatehouse's
// /v1/messages, served by mockllm's OpenAI emulator: the whole
// Anthropic → OpenAI → Anthropic translation over real loopback HTTP.

func (g *testGateway) messagesClient(opts ...aoption.RequestOption) anthropic.Client {
	base := []aoption.RequestOption{
		aoption.WithBaseURL(g.URL + "/"),
		aoption.WithAPIKey(clientKey),
		aoption.WithMaxRetries(0),
	}
	return anthropic.NewClient(append(base, opts...)...)
}

func msgsUserTurn(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "chat",
		MaxTokens: 200,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// lastUpstream decodes the last request the emulator received.
func lastMessagesUpstream(t *testing.T, up *upstream) (map[string]any, http.Header) {
	t.Helper()
	reqs := up.mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	r := reqs[len(reqs)-1]
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("upstream body %s: %v", r.Body, err)
	}
	return body, r.Header
}

const messagesMockReply = "Hello from mockllm, the gatehouse test upstream. You said: "

func TestMessagesNonStream(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	var resp *http.Response
	client := gw.messagesClient()
	msg, err := client.Messages.New(context.Background(), msgsUserTurn("Hello there"), aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != messagesMockReply+"Hello there" {
		t.Fatalf("content %+v", msg.Content)
	}
	if msg.Role != "assistant" || msg.StopReason != anthropic.StopReasonEndTurn || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("message %s", msg.RawJSON())
	}
	// mockllm counts one token per word of its reply.
	if msg.Usage.OutputTokens != int64(len(strings.Fields(messagesMockReply+"Hello there"))) || msg.Usage.InputTokens <= 0 {
		t.Fatalf("usage %+v", msg.Usage)
	}
	h := resp.Header
	if h.Get("Request-Id") == "" || h.Get("Request-Id") != h.Get("X-Gatehouse-Request-Id") || h.Get("X-Gatehouse-Provider") != "up" || h.Get("X-Gatehouse-Model") != "gpt-4o-mini" {
		t.Fatalf("headers %v", h)
	}
	body, hdr := lastMessagesUpstream(t, up)
	if body["model"] != "gpt-4o-mini" || body["max_completion_tokens"] != float64(200) || hdr.Get("Authorization") != "Bearer "+upstreamKey || hdr.Get("X-Api-Key") != "" {
		t.Fatalf("upstream got %v %v", body, hdr)
	}
	msgs := body["messages"].([]any)
	if sys := msgs[0].(map[string]any); sys["role"] != "system" || sys["content"] != "Be brief." {
		t.Fatalf("system prompt went up as %v", sys)
	}
	line := gw.logLine(t, h.Get("Request-Id"))
	if !strings.Contains(line, `"path":"/v1/messages"`) || !strings.Contains(line, `"completion_tokens":`) {
		t.Fatalf("log line %s", line)
	}
}

func TestMessagesStream(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Chunks: 4})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.messagesClient()
	stream := client.Messages.NewStreaming(context.Background(), msgsUserTurn("stream me please"))
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := messagesMockReply + "stream me please"
	if len(msg.Content) != 1 || msg.Content[0].Text != want || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("accumulated %s", msg.RawJSON())
	}
	// Usage arrives after finish_reason upstream; message_delta waits for it.
	if msg.Usage.OutputTokens != int64(len(strings.Fields(want))) || msg.Usage.InputTokens <= 0 {
		t.Fatalf("usage %+v", msg.Usage)
	}
	got := strings.Join(types, " ")
	if !strings.HasPrefix(got, "message_start content_block_start content_block_delta") ||
		!strings.HasSuffix(got, "content_block_stop message_delta message_stop") || strings.Count(got, "content_block_delta") != 4 {
		t.Fatalf("events %s", got)
	}
}

func msgsWeatherTool() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("Weather by city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}},
			Required:   []string{"city"},
		},
	}}
}

func TestMessagesToolRoundTrip(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.messagesClient()
	for _, streamed := range []bool{false, true} {
		params := msgsUserTurn("Weather in Paris? @mock(tool=get_weather)")
		params.Tools = []anthropic.ToolUnionParam{msgsWeatherTool()}
		params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}}
		var msg *anthropic.Message
		if streamed {
			s := client.Messages.NewStreaming(context.Background(), params)
			msg = &anthropic.Message{}
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			var err error
			if msg, err = client.Messages.New(context.Background(), params); err != nil {
				t.Fatal(err)
			}
		}
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 {
			t.Fatalf("stream=%v: %s", streamed, msg.RawJSON())
		}
		call := msg.Content[0].AsToolUse()
		if call.Name != "get_weather" || string(call.Input) != `{"city":"mock"}` || call.ID == "" {
			t.Fatalf("stream=%v: tool_use %s", streamed, msg.Content[0].RawJSON())
		}
		body, _ := lastMessagesUpstream(t, up)
		if body["tool_choice"] != "auto" || body["parallel_tool_calls"] != false {
			t.Fatalf("stream=%v: upstream tool settings %v", streamed, body)
		}

		// Hand the result back: the model answers in text.
		params.Messages = append(params.Messages, msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "sunny, 21°C", false)))
		final, err := client.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if final.StopReason != anthropic.StopReasonEndTurn || final.Content[0].Type != "text" {
			t.Fatalf("stream=%v: final %s", streamed, final.RawJSON())
		}
		body, _ = lastMessagesUpstream(t, up)
		msgs := body["messages"].([]any)
		asst := msgs[len(msgs)-2].(map[string]any)
		tool := msgs[len(msgs)-1].(map[string]any)
		calls := asst["tool_calls"].([]any)
		fn := calls[0].(map[string]any)["function"].(map[string]any)
		if asst["role"] != "assistant" || fn["name"] != "get_weather" || fn["arguments"] != `{"city":"mock"}` {
			t.Fatalf("stream=%v: assistant turn went up as %v", streamed, asst)
		}
		if tool["role"] != "tool" || tool["tool_call_id"] != call.ID || tool["content"] != "sunny, 21°C" {
			t.Fatalf("stream=%v: tool result went up as %v", streamed, tool)
		}
	}
}

func TestMessagesImages(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	params := msgsUserTurn("")
	params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewTextBlock("What is this?"),
		anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="),
		anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/cat.jpg"}),
	)}
	client := gw.messagesClient()
	if _, err := client.Messages.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	body, _ := lastMessagesUpstream(t, up)
	msgs := body["messages"].([]any)
	parts := msgs[len(msgs)-1].(map[string]any)["content"].([]any)
	if len(parts) != 3 {
		t.Fatalf("parts %v", parts)
	}
	for i, want := range []string{"data:image/png;base64,iVBORw0KGgo=", "https://example.com/cat.jpg"} {
		p := parts[i+1].(map[string]any)
		if p["type"] != "image_url" || p["image_url"].(map[string]any)["url"] != want {
			t.Fatalf("part %d: %v", i+1, p)
		}
	}
}

func TestMessagesAuth(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	ctx := context.Background()
	// x-api-key is what the SDK sends by default; Bearer works too.
	client := gw.messagesClient()
	if _, err := client.Messages.New(ctx, msgsUserTurn("hi")); err != nil {
		t.Fatalf("x-api-key: %v", err)
	}
	bearer := anthropic.NewClient(aoption.WithBaseURL(gw.URL+"/"), aoption.WithAuthToken(clientKey), aoption.WithMaxRetries(0))
	if _, err := bearer.Messages.New(ctx, msgsUserTurn("hi")); err != nil {
		t.Fatalf("bearer: %v", err)
	}
	wrong := gw.messagesClient(aoption.WithAPIKey("sk-wrong"))
	_, err := wrong.Messages.New(ctx, msgsUserTurn("hi"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Fatalf("bad key: %v", err)
	}
	// The SDK refuses to send without a key, so that one goes by hand.
	resp, body := post(t, gw.URL+"/v1/messages", "application/json", `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": ""})
	if resp.StatusCode != 401 || !strings.HasPrefix(body, `{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required`) {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
}

func TestMessagesErrors(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "server: {max_body_bytes: 65536}\n"))
	client := gw.messagesClient()
	unknown := msgsUserTurn("hi")
	unknown.Model = "claude-nonexistent"
	cases := []struct {
		name   string
		params anthropic.MessageNewParams
		status int
		typ    string
		retry  string
	}{
		{"unknown model", unknown, 404, "not_found_error", ""},
		{"upstream 429", msgsUserTurn("x @mock(error_status=429, retry_after=7)"), 429, "rate_limit_error", "7"},
		{"upstream 500", msgsUserTurn("x @mock(error_status=500)"), 500, "api_error", ""},
		{"upstream 503", msgsUserTurn("x @mock(error_status=503)"), 503, "overloaded_error", ""},
	}
	for _, c := range cases {
		_, err := client.Messages.New(context.Background(), c.params)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if apiErr.StatusCode != c.status || apiErr.Type() != anthropic.ErrorType(c.typ) || apiErr.RequestID == "" {
			t.Fatalf("%s: status %d type %q request-id %q: %s", c.name, apiErr.StatusCode, apiErr.Type(), apiErr.RequestID, apiErr.RawJSON())
		}
		if got := apiErr.Response.Header.Get("Retry-After"); got != c.retry {
			t.Fatalf("%s: Retry-After %q", c.name, got)
		}
	}

	// What the SDK will not send, sent by hand.
	raw := []struct {
		name, contentType, body string
		status                  int
		typ, msg                string
	}{
		{"missing max_tokens", "application/json", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"server tool", "application/json", `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, "invalid_request_error", "web_search_20250305"},
		{"media type", "text/plain", `{}`, 415, "invalid_request_error", "Content-Type"},
		{"too large", "application/json", `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 70000) + `"}]}`, 413, "request_too_large", "limit"},
	}
	for _, c := range raw {
		resp, body := post(t, gw.URL+"/v1/messages", c.contentType, c.body, map[string]string{"X-Api-Key": clientKey})
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != c.status || e.Type != "error" ||
			e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.msg) {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	// The OpenAI routes keep OpenAI's shape.
	resp, body := post(t, gw.URL+"/v1/chat/completions", "application/json", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, map[string]string{"X-Api-Key": clientKey})
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":"model_not_found"`) {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
}

// A stream that breaks after its first events ends with Anthropic's
// error event, which the SDK raises.
func TestMessagesStreamError(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Chunks: 6})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.messagesClient()
	s := client.Messages.NewStreaming(context.Background(), msgsUserTurn("one two three four five six @mock(fail_after=2)"))
	events := 0
	for s.Next() {
		events++
	}
	var apiErr *anthropic.Error
	if !errors.As(s.Err(), &apiErr) || apiErr.Type() != "api_error" || events < 3 {
		t.Fatalf("after %d events: %v", events, s.Err())
	}
}

func TestMessagesCountTokens(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.messagesClient()
	ctx := context.Background()
	params := anthropic.MessageCountTokensParams{
		Model:    "chat",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("Be brief.")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("The quick brown fox jumps over the lazy dog."))},
	}
	plain, err := client.Messages.CountTokens(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	// 10 tokens of text, 3 of "Be brief.", role names and framing.
	if plain.InputTokens < 13 || plain.InputTokens > 40 {
		t.Fatalf("input_tokens %d", plain.InputTokens)
	}
	params.Tools = []anthropic.MessageCountTokensToolUnionParam{{OfTool: msgsWeatherTool().OfTool}}
	withTools, err := client.Messages.CountTokens(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if withTools.InputTokens <= plain.InputTokens {
		t.Fatalf("tools added nothing: %d vs %d", withTools.InputTokens, plain.InputTokens)
	}
	if n := len(up.mock.Requests()); n != 0 {
		t.Fatalf("count_tokens called the upstream %d times", n)
	}
	params.Model = "nope"
	_, err = client.Messages.CountTokens(ctx, params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != "not_found_error" {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestMessagesClientDisconnectCancelsUpstream(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	for _, stream := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		params := msgsUserTurn("wait @mock(hang=true)")
		errc := make(chan error, 1)
		client := gw.messagesClient()
		go func() {
			if stream {
				s := client.Messages.NewStreaming(ctx, params)
				for s.Next() {
				}
				errc <- s.Err()
				return
			}
			_, err := client.Messages.New(ctx, params)
			errc <- err
		}()
		waitFor(t, 30*time.Second, "the upstream to receive the request", func() bool { return up.mock.Stats().InFlight == 1 })
		cancel()
		// That the cancellation arrives is what is tested; how soon is
		// BenchmarkClientDisconnectLag's (BENCHMARKS.md), since a loaded
		// machine stretches any bound a test would set.
		select {
		case <-up.mock.Cancelled():
		case <-time.After(30 * time.Second):
			t.Fatalf("stream=%v: upstream request was never cancelled", stream)
		}
		<-errc
	}
}

// TestMessagesThinkingToOpenAI: a Claude-style request with a thinking
// budget and top_k, served by OpenAI models. OpenAI refuses both on
// gpt-4o (the emulator answers as it does), so gatehouse sends neither
// there; an o-series model gets the budget as reasoning_effort. (That an
// openai-compatible server gets both is provider.FitTranslated's test:
// the emulator speaks for OpenAI, not for vLLM.)
func TestMessagesThinkingToOpenAI(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	cfg := `listen: 127.0.0.1:0
providers:
  - {name: oai, type: openai, base_url: ` + up.URL + `/v1, api_key: ` + upstreamKey + `}
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - {name: claude-on-4o, targets: [{provider: oai, model: gpt-4o}]}
  - {name: claude-on-o3, targets: [{provider: oai, model: o3-mini}]}
`
	gw := startGateway(t, cfg)
	client := gw.messagesClient()
	for _, c := range []struct {
		model        string
		topK, effort bool
	}{{"claude-on-4o", false, false}, {"claude-on-o3", false, true}} {
		p := msgsUserTurn("Think first.")
		p.Model, p.MaxTokens = anthropic.Model(c.model), 4096
		p.TopK = anthropic.Int(40)
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(2048)
		if _, err := client.Messages.New(context.Background(), p); err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		body, _ := lastMessagesUpstream(t, up)
		if _, ok := body["top_k"]; ok != c.topK {
			t.Errorf("%s: top_k sent %v, want %v (%v)", c.model, ok, c.topK, body)
		}
		if _, ok := body["reasoning_effort"]; ok != c.effort {
			t.Errorf("%s: reasoning_effort sent %v, want %v (%v)", c.model, ok, c.effort, body)
		}
	}
}
