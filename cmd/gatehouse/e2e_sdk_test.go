package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
)

func userMessage(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

func TestSDKChatCompletion(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.client()

	var resp *http.Response
	got, err := client.Chat.Completions.New(context.Background(), userMessage("Hello there"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || !strings.Contains(got.Choices[0].Message.Content, "Hello there") {
		t.Fatalf("unexpected reply %+v", got.Choices)
	}
	if got.Choices[0].FinishReason != "stop" || got.Usage.TotalTokens == 0 ||
		got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Fatalf("finish %q usage %+v", got.Choices[0].FinishReason, got.Usage)
	}
	id := resp.Header.Get("X-Gatehouse-Request-Id")
	if id == "" || resp.Header.Get("X-Gatehouse-Provider") != "up" || resp.Header.Get("X-Gatehouse-Model") != "gpt-4o-mini" {
		t.Fatalf("gateway headers missing: %v", resp.Header)
	}

	// What went upstream: the target model, the provider's key, never the client's.
	recs := up.mock.Requests()
	last := recs[len(recs)-1]
	if got := last.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		t.Fatalf("upstream authorization %q", got)
	}
	if strings.Contains(string(last.Body), clientKey) || strings.Contains(last.Header.Get("Authorization"), clientKey) {
		t.Fatal("client key leaked upstream")
	}
	var sent map[string]any
	_ = json.Unmarshal(last.Body, &sent)
	if sent["model"] != "gpt-4o-mini" {
		t.Fatalf("upstream model %v", sent["model"])
	}

	line := gw.logLine(t, id)
	for _, want := range []string{`"model":"chat"`, `"provider":"up"`, `"status":200`, `"latency_ms":`, `"prompt_tokens":`, `"completion_tokens":`, `"total_tokens":`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %s: %s", want, line)
		}
	}
	if strings.Contains(gw.Logs.String(), clientKey) || strings.Contains(gw.Logs.String(), upstreamKey) {
		t.Fatal("a secret reached the logs")
	}
}

func TestSDKEmbeddings(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.client()
	res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model:      "embed",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta"}},
		Dimensions: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || len(res.Data[0].Embedding) != 8 || res.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings %d × %d, usage %+v", len(res.Data), len(res.Data[0].Embedding), res.Usage)
	}
}

func TestSDKModelsList(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	client := gw.client()
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "chat,embed" {
		t.Fatalf("models %v", ids)
	}
	m, err := client.Models.Get(context.Background(), "chat")
	if err != nil || m.ID != "chat" {
		t.Fatalf("get model: %v %v", m, err)
	}
}

func TestSDKErrors(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	ctx := context.Background()
	cases := []struct {
		name   string
		client openai.Client
		params openai.ChatCompletionNewParams
		status int
		code   string
	}{
		{"unknown key", gw.client(option.WithAPIKey("gh-wrong")), userMessage("x"), 401, "invalid_api_key"},
		{"unknown model", gw.client(), openai.ChatCompletionNewParams{Model: "nope", Messages: userMessage("x").Messages}, 404, "model_not_found"},
		{"upstream 429", gw.client(), userMessage("x @mock(error_status=429, retry_after=7)"), 429, "rate_limit_exceeded"},
		{"upstream 500", gw.client(), userMessage("x @mock(error_status=500)"), 500, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.client.Chat.Completions.New(ctx, c.params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v, want an API error", err)
			}
			if apiErr.StatusCode != c.status || (c.code != "" && apiErr.Code != c.code) || apiErr.Message == "" {
				t.Fatalf("got %d %q %q", apiErr.StatusCode, apiErr.Code, apiErr.Message)
			}
			if c.status == 429 && apiErr.Response.Header.Get("Retry-After") != "7" {
				t.Fatalf("Retry-After %q", apiErr.Response.Header.Get("Retry-After"))
			}
		})
	}
	// The stream variant of an upstream error surfaces before any event.
	client := gw.client()
	stream := client.Chat.Completions.NewStreaming(ctx, userMessage("x @mock(error_status=503)"))
	for stream.Next() {
		t.Fatal("got a chunk from a failing upstream")
	}
	var apiErr *openai.Error
	if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("stream error %v", stream.Err())
	}
}
