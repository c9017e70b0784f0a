package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"gatehouse/internal/mockllm"
)

// azureConfig routes "chat" and "embed" to the classic deployments API
// and "chat-v1" to the v1 API of one emulated Azure resource.
func azureConfig(up *upstream) string {
	return `listen: 127.0.0.1:0
providers:
  - name: az
    type: azure
    base_url: ` + up.URL + `
    api_key: ` + upstreamKey + `
  - name: az-v1
    type: azure
    base_url: ` + up.URL + `/openai/v1
    api_key: ` + upstreamKey + `
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - name: chat
    targets: [{provider: az, model: prod-4o}]
  - name: chat-v1
    targets: [{provider: az-v1, model: prod-4o}]
  - name: embed
    targets: [{provider: az, model: prod-embed}]
`
}

func TestAzureChat(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, azureConfig(up))
	client := gw.client()
	ctx := context.Background()

	for _, c := range []struct{ model, path, query string }{
		{"chat", "/openai/deployments/prod-4o/chat/completions", "api-version=2024-10-21"},
		{"chat-v1", "/openai/v1/chat/completions", ""},
	} {
		t.Run(c.model, func(t *testing.T) {
			params := userMessage("Hello Azure")
			params.Model = c.model
			got, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got.Choices[0].Message.Content, "Hello Azure") || got.Choices[0].FinishReason != "stop" || got.Usage.TotalTokens == 0 {
				t.Fatalf("reply %+v usage %+v", got.Choices, got.Usage)
			}
			recs := up.mock.Requests()
			last := recs[len(recs)-1]
			if last.Path != c.path {
				t.Fatalf("upstream path %s, want %s", last.Path, c.path)
			}
			if last.Header.Get("Api-Key") != upstreamKey || last.Header.Get("Authorization") != "" {
				t.Fatalf("upstream credentials: api-key %q, authorization %q", last.Header.Get("Api-Key"), last.Header.Get("Authorization"))
			}
			var sent map[string]any
			_ = json.Unmarshal(last.Body, &sent)
			if sent["model"] != "prod-4o" {
				t.Fatalf("upstream model %v", sent["model"])
			}
		})
	}
	// The query string is not recorded; a missing api-version would have
	// been Azure's 404, so the classic call above proves it was sent.
}

func TestAzureToolRoundTrip(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, azureConfig(up))
	client := gw.client()
	params := openai.ChatCompletionNewParams{
		Model: "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Weather in Paris?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			}}}},
			openai.ToolMessage(`{"temp_c":21}`, "call_1"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
	}
	if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	recs := up.mock.Requests()
	var sent struct {
		Messages []map[string]any `json:"messages"`
		Tools    []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(recs[len(recs)-1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Tools) != 1 || len(sent.Messages) != 3 || sent.Messages[2]["tool_call_id"] != "call_1" {
		t.Fatalf("the tool loop did not reach Azure intact: %s", recs[len(recs)-1].Body)
	}
}

func TestAzureEmbeddings(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, azureConfig(up))
	client := gw.client()
	res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "embed",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("alpha")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 1 || len(res.Data[0].Embedding) == 0 {
		t.Fatalf("embeddings %+v", res.Data)
	}
	recs := up.mock.Requests()
	if p := recs[len(recs)-1].Path; p != "/openai/deployments/prod-embed/embeddings" {
		t.Fatalf("upstream path %s", p)
	}
}

func TestAzureRateLimit(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, azureConfig(up))
	client := gw.client()
	_, err := client.Chat.Completions.New(context.Background(), userMessage("x @mock(error_status=429, retry_after=9)"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want an API error", err)
	}
	if apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") != "9" || !strings.Contains(apiErr.Message, "Rate limit") {
		t.Fatalf("got %d %q Retry-After %q", apiErr.StatusCode, apiErr.Message, apiErr.Response.Header.Get("Retry-After"))
	}
}
