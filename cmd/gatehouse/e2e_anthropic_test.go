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
	"github.com/openai/openai-go/v3/shared"

	"gatehouse/internal/mockllm"
)

// anthropicConfig routes "chat" to the Anthropic emulator, "chat-v1" to it
// through a base_url ending in /v1, and "chat-drop" through a provider
// that drops parameters Anthropic cannot honour.
func anthropicConfig(up *upstream) string {
	return `listen: 127.0.0.1:0
providers:
  - name: claude
    type: anthropic
    base_url: ` + up.URL + `
    api_key: ` + upstreamKey + `
  - name: claude-v1
    type: anthropic
    base_url: ` + up.URL + `/v1/
    api_key: ` + upstreamKey + `
  - name: claude-drop
    type: anthropic
    base_url: ` + up.URL + `
    api_key: ` + upstreamKey + `
    drop_unsupported: true
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - name: chat
    targets: [{provider: claude, model: claude-sonnet-4-5}]
  - name: chat-v1
    targets: [{provider: claude-v1, model: claude-sonnet-4-5}]
  - name: chat-drop
    targets: [{provider: claude-drop, model: claude-sonnet-4-5}]
`
}

func anthLastUpstream(t *testing.T, up *upstream) (mockllm.Recorded, map[string]any) {
	t.Helper()
	recs := up.mock.Requests()
	last := recs[len(recs)-1]
	var sent map[string]any
	if err := json.Unmarshal(last.Body, &sent); err != nil {
		t.Fatalf("upstream body: %v", err)
	}
	return last, sent
}

func TestAnthropicChat(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, anthropicConfig(up))
	client := gw.client()
	for _, model := range []string{"chat", "chat-v1"} {
		t.Run(model, func(t *testing.T) {
			params := userMessage("Hello Claude")
			params.Model = model
			params.Messages = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief.")}, params.Messages...)
			var resp *http.Response
			got, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got.Choices[0].Message.Content, "Hello Claude") || got.Choices[0].FinishReason != "stop" ||
				got.Usage.PromptTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
				t.Fatalf("reply %+v usage %+v", got.Choices, got.Usage)
			}
			if resp.Header.Get("X-Gatehouse-Provider") == "" {
				t.Fatalf("gateway headers %v", resp.Header)
			}
			last, sent := anthLastUpstream(t, up)
			if last.Path != "/v1/messages" || last.Header.Get("X-Api-Key") != upstreamKey || last.Header.Get("Authorization") != "" ||
				last.Header.Get("Anthropic-Version") != "2023-06-01" {
				t.Fatalf("upstream %s headers %v", last.Path, last.Header)
			}
			if sent["model"] != "claude-sonnet-4-5" || sent["max_tokens"] != float64(4096) {
				t.Fatalf("upstream body %s", last.Body)
			}
			if sys, _ := sent["system"].([]any); len(sys) != 1 {
				t.Fatalf("system not hoisted: %s", last.Body)
			}
		})
	}
}

func TestAnthropicToolRoundTrip(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Chunks: 4})
	gw := startGateway(t, anthropicConfig(up))
	client := gw.client()
	ctx := context.Background()
	params := userMessage("What is the weather in Paris? @mock(tool=get_weather)")
	params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("Current weather"),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	})}
	for _, streamed := range []bool{false, true} {
		var msg openai.ChatCompletionMessage
		var finish string
		if streamed {
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
		} else {
			got, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			msg, finish = got.Choices[0].Message, got.Choices[0].FinishReason
		}
		if finish != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" ||
			msg.ToolCalls[0].Function.Arguments != `{"city":"mock"}` || !strings.HasPrefix(msg.ToolCalls[0].ID, "toolu_") {
			t.Fatalf("streamed=%v: finish %q message %+v", streamed, finish, msg)
		}
	}

	// Hand the call back with its result: the mock checks the tool_result
	// answers the tool_use, and quotes the result in its reply.
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	call := first.Choices[0].Message.ToolCalls[0]
	params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temp_c":21}`, call.ID))
	final, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if final.Choices[0].FinishReason != "stop" || !strings.Contains(final.Choices[0].Message.Content, `{"temp_c":21}`) {
		t.Fatalf("final %+v", final.Choices[0])
	}
	_, sent := anthLastUpstream(t, up)
	msgs := sent["messages"].([]any)
	if len(msgs) != 3 || msgs[2].(map[string]any)["role"] != "user" {
		t.Fatalf("upstream history %v", msgs)
	}
}

func TestAnthropicJSONSchema(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, anthropicConfig(up))
	params := userMessage("Give me a city")
	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "city", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "population": map[string]any{"type": "integer"}}}},
	}}
	client := gw.client()
	got, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Name       string `json:"name"`
		Population int    `json:"population"`
	}
	if err := json.Unmarshal([]byte(got.Choices[0].Message.Content), &v); err != nil || v.Name == "" || got.Choices[0].FinishReason != "stop" || len(got.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("content %q finish %q: %v", got.Choices[0].Message.Content, got.Choices[0].FinishReason, err)
	}
}

func TestAnthropicErrors(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, anthropicConfig(up))
	ctx := context.Background()
	client := gw.client()

	_, err := client.Chat.Completions.New(ctx, userMessage("x @mock(error_status=429, retry_after=7)"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || !strings.Contains(apiErr.Message, "rate limit") ||
		apiErr.Response.Header.Get("Retry-After") != "7" {
		t.Fatalf("got %v", err)
	}

	// A parameter Anthropic cannot honour is refused before any upstream call...
	before := up.mock.Stats().Requests
	params := userMessage("x")
	params.N = openai.Int(2)
	_, err = client.Chat.Completions.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "n" || apiErr.Code != "unsupported_parameter" {
		t.Fatalf("got %v", err)
	}
	if up.mock.Stats().Requests != before {
		t.Fatal("a refused request reached the upstream")
	}
	// ... unless the provider is set to drop it.
	params.Model = "chat-drop"
	params.Seed = openai.Int(3)
	if _, err := client.Chat.Completions.New(ctx, params); err != nil {
		t.Fatalf("drop_unsupported: %v", err)
	}
	_, sent := anthLastUpstream(t, up)
	if _, ok := sent["n"]; ok {
		t.Fatalf("n went upstream: %v", sent)
	}

	// An upstream 529 (overloaded) keeps its status and message.
	_, err = client.Chat.Completions.New(ctx, userMessage("x @mock(error_status=529)"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || !strings.Contains(apiErr.Message, "Overloaded") {
		t.Fatalf("got %v", err)
	}
}

// TestAnthropicThinkingToolLoop hands a thinking turn back: Anthropic (and
// the mock) refuse a tool loop whose assistant turn lacks its signed
// thinking, so reasoning_content and reasoning_signature must round-trip.
func TestAnthropicThinkingToolLoop(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, anthropicConfig(up))
	post := func(body string) map[string]any {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+clientKey)
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, out)
		}
		return out
	}
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	user := `{"role":"user","content":"Weather? @mock(tool=get_weather)"}`
	first := post(`{"model":"chat","reasoning_effort":"low",` + tools + `,"messages":[` + user + `]}`)
	msg := first["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["reasoning_content"] == "" || msg["reasoning_signature"] == nil || msg["tool_calls"] == nil {
		t.Fatalf("first turn %v", msg)
	}
	_, sent := anthLastUpstream(t, up)
	if th, _ := sent["thinking"].(map[string]any); th["budget_tokens"] != float64(2048) || sent["max_tokens"] != float64(4096+2048) {
		t.Fatalf("upstream thinking %v max_tokens %v", sent["thinking"], sent["max_tokens"])
	}
	assistant, _ := json.Marshal(msg)
	call := msg["tool_calls"].([]any)[0].(map[string]any)["id"].(string)
	final := post(`{"model":"chat","reasoning_effort":"low",` + tools + `,"messages":[` + user + `,` + string(assistant) +
		`,{"role":"tool","tool_call_id":"` + call + `","content":"sunny"}]}`)
	choice := final["choices"].([]any)[0].(map[string]any)
	if choice["finish_reason"] != "stop" || !strings.Contains(choice["message"].(map[string]any)["content"].(string), "sunny") {
		t.Fatalf("final %v", choice)
	}
}
