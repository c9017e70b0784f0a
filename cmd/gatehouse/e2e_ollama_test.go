package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/config"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// ollamaModels are what the emulated box has pulled.
var ollamaModels = []string{"llama3.2:latest", "qwen3:8b", "nomic-embed-text:latest"}

// ollamaConfig routes two configured names to an emulated Ollama box; the
// box's other models are discovered. "qwen3:8b" is configured too, to a
// different model, so the configured entry must win over the discovered
// one. The "cold" provider points at the same box with discovery off.
func ollamaConfig(up *upstream) string {
	return `listen: 127.0.0.1:0
providers:
  - name: box
    type: ollama
    base_url: ` + up.URL + `/
    api_key: ` + upstreamKey + `
    local: true
  - name: cold
    type: ollama
    base_url: ` + up.URL + `
    api_key: ` + upstreamKey + `
    discover: false
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - name: local-chat
    targets: [{provider: box, model: llama3.2}]
  - name: local-embed
    targets: [{provider: cold, model: nomic-embed-text}]
  - name: qwen3:8b
    targets: [{provider: box, model: llama3.2:latest}]
  - name: missing
    targets: [{provider: cold, model: llama9}]
`
}

func startOllama(t *testing.T, o mockllm.Options) (*upstream, *testGateway) {
	t.Helper()
	o.Models = ollamaModels
	up := startUpstream(t, o)
	return up, startGateway(t, ollamaConfig(up))
}

// lastOllamaRequest is the last body the box received on path.
func lastOllamaRequest(t *testing.T, up *upstream, path string) (mockllm.Recorded, map[string]any) {
	t.Helper()
	recs := up.mock.Requests()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Path == path {
			var body map[string]any
			if err := json.Unmarshal(recs[i].Body, &body); err != nil {
				t.Fatalf("upstream body is not JSON: %s", recs[i].Body)
			}
			return recs[i], body
		}
	}
	t.Fatalf("no upstream request to %s", path)
	return mockllm.Recorded{}, nil
}

func TestOllamaChat(t *testing.T) {
	up, gw := startOllama(t, mockllm.Options{})
	var resp *http.Response
	params := userMessage("Hello Ollama")
	params.Model = "local-chat"
	params.Temperature = openai.Float(0.5)
	params.MaxCompletionTokens = openai.Int(200)
	client := gw.client()
	got, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if !strings.Contains(c.Message.Content, "You said: Hello Ollama") || c.FinishReason != "stop" || got.Object != "chat.completion" {
		t.Fatalf("reply %+v", got)
	}
	if got.Usage.PromptTokens == 0 || got.Usage.CompletionTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Fatalf("usage %+v", got.Usage)
	}
	if resp.Header.Get("X-Gatehouse-Provider") != "box" || resp.Header.Get("X-Gatehouse-Model") != "llama3.2" {
		t.Fatalf("gateway headers %v", resp.Header)
	}
	rec, body := lastOllamaRequest(t, up, "/api/chat")
	if rec.Header.Get("Authorization") != "Bearer "+upstreamKey || strings.Contains(string(rec.Body), clientKey) {
		t.Fatalf("upstream credentials %q", rec.Header.Get("Authorization"))
	}
	opts, _ := body["options"].(map[string]any)
	if body["model"] != "llama3.2" || body["stream"] != false || opts["temperature"] != 0.5 || opts["num_predict"] != 200.0 {
		t.Fatalf("upstream body %s", rec.Body)
	}
}

var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Current weather"),
	Parameters: openai.FunctionParameters{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
})

func TestOllamaToolCalls(t *testing.T) {
	up, gw := startOllama(t, mockllm.Options{})
	client := gw.client()
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "local-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris? @mock(tool=get_weather)")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
	}
	got, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("reply %+v", c)
	}
	call := c.Message.ToolCalls[0]
	if !strings.HasPrefix(call.ID, "call_") || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"mock"}` {
		t.Fatalf("tool call %+v", call)
	}

	// The result goes back with the call; Ollama gets the tool's name.
	params.Messages = append(params.Messages, c.Message.ToParam(), openai.ToolMessage(`{"temp_c":21}`, call.ID))
	final, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if final.Choices[0].FinishReason != "stop" || final.Choices[0].Message.Content == "" {
		t.Fatalf("final %+v", final.Choices[0])
	}
	_, body := lastOllamaRequest(t, up, "/api/chat")
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("upstream messages %v", body["messages"])
	}
	assistant, _ := msgs[1].(map[string]any)
	calls, _ := assistant["tool_calls"].([]any)
	fn, _ := calls[0].(map[string]any)["function"].(map[string]any)
	if args, _ := fn["arguments"].(map[string]any); args["city"] != "mock" {
		t.Fatalf("arguments not sent as an object: %v", assistant)
	}
	result, _ := msgs[2].(map[string]any)
	if result["role"] != "tool" || result["tool_name"] != "get_weather" || result["tool_call_id"] != call.ID {
		t.Fatalf("tool result %v", result)
	}

	// Streamed, the call arrives whole in one delta.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "local-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Paris @mock(tool=get_weather)")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
	})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	sc := acc.Choices[0]
	if sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != 1 || sc.Message.ToolCalls[0].Function.Arguments != `{"city":"mock"}` ||
		sc.Message.ToolCalls[0].ID == "" {
		t.Fatalf("streamed %+v", sc)
	}

	// Ollama cannot be made to call a tool: a forced choice is a clear 400.
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tool_choice" || !strings.Contains(apiErr.Message, "drop_unsupported") {
		t.Fatalf("forced tool choice: %v", err)
	}
}

func TestOllamaEmbeddings(t *testing.T) {
	up, gw := startOllama(t, mockllm.Options{})
	client := gw.client()
	got, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "local-embed",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"why is the sky blue?", "hi"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 2 || len(got.Data[0].Embedding) != 768 || got.Data[1].Index != 1 || got.Usage.PromptTokens != 6 || got.Usage.TotalTokens != 6 {
		t.Fatalf("%d vectors, usage %+v", len(got.Data), got.Usage)
	}
	_, body := lastOllamaRequest(t, up, "/api/embed")
	if body["model"] != "nomic-embed-text" {
		t.Fatalf("upstream %v", body)
	}
}

func TestOllamaDiscovery(t *testing.T) {
	up, gw := startOllama(t, mockllm.Options{})
	client := gw.client()
	ctx := context.Background()
	for _, c := range []struct{ model, upstreamModel string }{
		{"llama3.2:latest", "llama3.2:latest"}, // discovered
		{"llama3.2", "llama3.2:latest"},        // its short name
		{"box/qwen3:8b", "qwen3:8b"},           // provider-qualified
		{"qwen3:8b", "llama3.2:latest"},        // configured: wins over the discovered qwen3:8b
	} {
		params := userMessage("hi")
		params.Model = c.model
		var resp *http.Response
		if _, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp)); err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		_, body := lastOllamaRequest(t, up, "/api/chat")
		if body["model"] != c.upstreamModel || resp.Header.Get("X-Gatehouse-Provider") != "box" {
			t.Fatalf("%s went upstream as %v via %s", c.model, body["model"], resp.Header.Get("X-Gatehouse-Provider"))
		}
	}
	// cold does not discover.
	params := userMessage("hi")
	params.Model = "cold/qwen3:8b"
	var apiErr *openai.Error
	if _, err := client.Chat.Completions.New(ctx, params); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("cold/qwen3:8b: %v", err)
	}

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	want := []string{"local-chat", "local-embed", "qwen3:8b", "missing", "llama3.2:latest", "nomic-embed-text:latest",
		"box/llama3.2:latest", "box/qwen3:8b", "box/nomic-embed-text:latest"}
	if !slices.Equal(ids, want) {
		t.Fatalf("models %v, want %v", ids, want)
	}
	if m, err := client.Models.Get(ctx, "box/qwen3:8b"); err != nil || m.ID != "box/qwen3:8b" {
		t.Fatalf("get discovered model: %v %v", m, err)
	}
}

func TestOllamaErrors(t *testing.T) {
	_, gw := startOllama(t, mockllm.Options{})
	client := gw.client()
	ctx := context.Background()

	params := userMessage("hi")
	params.Model = "missing"
	_, err := client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Message != `model "llama9" not found, try pulling it first` {
		t.Fatalf("not pulled: %v", err)
	}

	params = userMessage("hi @mock(error_status=429, retry_after=7)")
	params.Model = "local-chat"
	_, err = client.Chat.Completions.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || !strings.Contains(apiErr.Message, "too many requests") ||
		apiErr.Response.Header.Get("Retry-After") != "7" {
		t.Fatalf("rate limited: %v", err)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "local-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi @mock(error_status=503)")}})
	for stream.Next() {
	}
	if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "server busy") {
		t.Fatalf("stream error: %v", stream.Err())
	}
}

// TestOllamaDiscoveryKeepsLastKnown polls fast against a box whose
// /api/tags fails for a while, then lists a new model.
func TestOllamaDiscoveryKeepsLastKnown(t *testing.T) {
	before := mockllm.New(mockllm.Options{Models: []string{"qwen3:8b"}})
	after := mockllm.New(mockllm.Options{Models: []string{"qwen3:8b", "gemma3:latest"}})
	var phase atomic.Int32 // 0: before, 1: failing, 2: after
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch phase.Load() {
		case 0:
			before.ServeHTTP(w, r)
		case 1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"disk on fire"}`)
		default:
			after.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()

	cfg := &config.Config{Providers: []config.Provider{{Name: "box", Type: "ollama", BaseURL: srv.URL}}}
	base, _, err := providerDeployment(providerTypes(), &cfg.Providers[0])
	if err != nil {
		t.Fatal(err)
	}
	table := route.NewTable(nil)
	d := newDiscovery(cfg, providerTypes(), map[string]provider.Deployment{"box": base}, table)
	d.interval = 10 * time.Millisecond
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.start(ctx, slog.New(slog.NewJSONHandler(logs, nil)))
	defer d.stop()

	if _, ok := table.Lookup("qwen3:8b"); !ok {
		t.Fatal("not routable after the first poll")
	}
	phase.Store(1)
	waitFor(t, 30*time.Second, "a discovery warning", func() bool { return strings.Contains(logs.String(), "disk on fire") })
	if _, ok := table.Lookup("box/qwen3:8b"); !ok {
		t.Fatal("a failed poll dropped the models last seen")
	}
	phase.Store(2)
	waitFor(t, 30*time.Second, "gemma3 to be discovered", func() bool { _, ok := table.Lookup("gemma3"); return ok })

	d.stop()
	select {
	case <-d.done:
	default:
		t.Fatal("stop returned with the poller still running")
	}
	d.stop() // idempotent
}
