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

// geminiConfig routes "chat" and "embed" to a mockllm speaking Gemini.
func geminiConfig(up *upstream) string {
	return `listen: 127.0.0.1:0
providers:
  - name: gem
    type: gemini
    base_url: ` + up.URL + `/v1beta
    api_key: ` + upstreamKey + `
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - name: chat
    targets: [{provider: gem, model: gemini-2.5-flash}]
  - name: embed
    targets: [{provider: gem, model: gemini-embedding-001}]
`
}

func startGemini(t *testing.T, o mockllm.Options) (*upstream, *testGateway) {
	t.Helper()
	up := startUpstream(t, o)
	return up, startGateway(t, geminiConfig(up))
}

func lastUpstream(t *testing.T, up *upstream) mockllm.Recorded {
	t.Helper()
	recs := up.mock.Requests()
	if len(recs) == 0 {
		t.Fatal("nothing reached the upstream")
	}
	return recs[len(recs)-1]
}

func TestGeminiE2EChat(t *testing.T) {
	up, gw := startGemini(t, mockllm.Options{})
	client := gw.client()
	var resp *http.Response
	got, err := client.Chat.Completions.New(context.Background(), userMessage("Hello there"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if !strings.Contains(c.Message.Content, "You said: Hello there") || c.FinishReason != "stop" {
		t.Fatalf("reply %+v", c)
	}
	if got.Usage.PromptTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Fatalf("usage %+v", got.Usage)
	}
	if resp.Header.Get("X-Gatehouse-Provider") != "gem" || resp.Header.Get("X-Gatehouse-Model") != "gemini-2.5-flash" {
		t.Fatalf("headers %v", resp.Header)
	}
	rec := lastUpstream(t, up)
	if rec.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || rec.Header.Get("X-Goog-Api-Key") != upstreamKey ||
		rec.Header.Get("Authorization") != "" {
		t.Fatalf("upstream %s %v", rec.Path, rec.Header)
	}
	if strings.Contains(string(rec.Body), clientKey) || !strings.Contains(string(rec.Body), `"contents"`) {
		t.Fatalf("upstream body %s", rec.Body)
	}
}

var gemWeatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Current weather"),
	Parameters: shared.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []string{"city"},
	},
})

func TestGeminiE2EToolRoundTrip(t *testing.T) {
	up, gw := startGemini(t, mockllm.Options{})
	client := gw.client()
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris? @mock(tool=get_weather)")},
		Tools:    []openai.ChatCompletionToolUnionParam{gemWeatherTool},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	c := first.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("first answer %+v", c)
	}
	tc := c.Message.ToolCalls[0]
	var args map[string]any
	if tc.ID == "" || tc.Function.Name != "get_weather" || json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil || args["city"] != "mockllm" {
		t.Fatalf("tool call %+v", tc)
	}

	// The same call streamed arrives whole, with the same shape.
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if st := acc.Choices[0]; st.FinishReason != "tool_calls" || len(st.Message.ToolCalls) != 1 ||
		st.Message.ToolCalls[0].Function.Name != "get_weather" || st.Message.ToolCalls[0].Function.Arguments != tc.Function.Arguments {
		t.Fatalf("streamed tool call %+v", st)
	}

	// The result goes back; the emulator checks it answers the call by name.
	params.Messages = append(params.Messages, c.Message.ToParam(), openai.ToolMessage(`{"temp_c":21}`, tc.ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(second.Choices[0].Message.Content, `Function get_weather returned {"temp_c":21}.`) || second.Choices[0].FinishReason != "stop" {
		t.Fatalf("second answer %+v", second.Choices[0])
	}
	body := string(lastUpstream(t, up).Body)
	for _, want := range []string{`"functionCall":{"name":"get_weather"`, `"functionResponse":{"name":"get_weather","response":{"temp_c":21}}`, `"parametersJsonSchema"`} {
		if !strings.Contains(body, want) {
			t.Errorf("upstream body lacks %s: %s", want, body)
		}
	}
}

func TestGeminiE2EReasoning(t *testing.T) {
	_, gw := startGemini(t, mockllm.Options{})
	params := userMessage("think first")
	params.ReasoningEffort = shared.ReasoningEffortLow
	client := gw.client()
	got, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Choices[0].Message.RawJSON(), `"reasoning_content":"**Planning the answer**`) ||
		got.Usage.CompletionTokensDetails.ReasoningTokens == 0 ||
		got.Usage.CompletionTokens <= got.Usage.CompletionTokensDetails.ReasoningTokens {
		t.Fatalf("reasoning not carried: %s usage %+v", got.Choices[0].Message.RawJSON(), got.Usage)
	}
}

func TestGeminiE2EEmbeddings(t *testing.T) {
	up, gw := startGemini(t, mockllm.Options{})
	client := gw.client()
	got, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model:      "embed",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta"}},
		Dimensions: openai.Int(16),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 2 || len(got.Data[0].Embedding) != 16 || got.Data[1].Index != 1 || got.Data[0].Embedding[0] == got.Data[1].Embedding[0] {
		t.Fatalf("embeddings %+v", got.Data)
	}
	if rec := lastUpstream(t, up); rec.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" {
		t.Fatalf("upstream path %s", rec.Path)
	}
}

func TestGeminiE2EErrors(t *testing.T) {
	up, gw := startGemini(t, mockllm.Options{})
	client := gw.client()
	ctx := context.Background()

	_, err := client.Chat.Completions.New(ctx, userMessage("x @mock(error_status=429, retry_after=7)"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") != "7" ||
		!strings.Contains(apiErr.Message, "You exceeded your current quota") {
		t.Fatalf("429: %v", err)
	}

	before := len(up.mock.Requests())
	params := userMessage("hi")
	params.Logprobs = openai.Bool(true)
	_, err = client.Chat.Completions.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "logprobs" || apiErr.Code != "unsupported_parameter" {
		t.Fatalf("unsupported parameter: %v", err)
	}
	if len(up.mock.Requests()) != before {
		t.Fatal("a request the gateway refused reached the upstream")
	}
}
