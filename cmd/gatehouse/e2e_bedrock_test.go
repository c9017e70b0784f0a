package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/provider/providertest"
)

const (
	awsKeyID      = "AKIDGATEHOUSETEST"
	awsSecret     = "gatehouse/test/secret/key/0123456789abcdef"
	awsToken      = "session-token-for-tests"
	bedrockClaude = "anthropic.claude-3-5-sonnet-20240620-v1:0"
)

// startBedrock starts an emulated bedrock-runtime that checks SigV4
// signatures by the test key pair, and a gateway whose "chat" model is
// Claude on it. The gateway's credentials come from the AWS_* environment,
// as in production; secret is what it signs with.
func startBedrock(t *testing.T, o mockllm.Options, secret string) (*upstream, *testGateway) {
	t.Helper()
	o.AWSAccessKeyID, o.AWSSecretKey, o.AWSSessionToken = awsKeyID, awsSecret, awsToken
	up := startUpstream(t, o)
	t.Setenv("AWS_ACCESS_KEY_ID", awsKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", awsToken)
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	t.Setenv("AWS_REGION", "eu-central-1")
	gw := startGateway(t, `listen: 127.0.0.1:0
providers:
  - name: br
    type: bedrock
    base_url: `+up.URL+`
    region: us-west-2
keys:
  - {key: `+clientKey+`, name: tester, project: qa}
models:
  - name: chat
    targets: [{provider: br, model: `+bedrockClaude+`}]
`)
	return up, gw
}

var bedrockWeatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Current weather"),
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []string{"city"}},
})

func TestBedrockChat(t *testing.T) {
	up, gw := startBedrock(t, mockllm.Options{}, awsSecret)
	client := gw.client()
	params := openai.ChatCompletionNewParams{
		Model: "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage("Hello Bedrock"),
		},
		MaxTokens:   openai.Int(300),
		Temperature: openai.Float(0.5),
	}
	got, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Choices[0].Message.Content, "Hello Bedrock") || got.Choices[0].FinishReason != "stop" {
		t.Fatalf("reply %+v", got.Choices)
	}
	if got.Usage.PromptTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Fatalf("usage %+v", got.Usage)
	}
	recs := up.mock.Requests()
	last := recs[len(recs)-1]
	if last.Path != "/model/"+bedrockClaude+"/converse" {
		t.Fatalf("upstream path %s", last.Path)
	}
	if a := last.Header.Get("Authorization"); !strings.Contains(a, "Credential="+awsKeyID+"/") || !strings.Contains(a, "/us-west-2/bedrock/aws4_request") {
		t.Fatalf("upstream authorization %q", a)
	}
	var sent struct {
		System          []map[string]string `json:"system"`
		InferenceConfig map[string]any      `json:"inferenceConfig"`
	}
	_ = json.Unmarshal(last.Body, &sent)
	if len(sent.System) != 1 || sent.System[0]["text"] != "You are terse." || sent.InferenceConfig["maxTokens"] != 300.0 {
		t.Fatalf("converse body %s", last.Body)
	}
}

func TestBedrockBadSignature(t *testing.T) {
	_, gw := startBedrock(t, mockllm.Options{}, "not-the-secret")
	client := gw.client()
	_, err := client.Chat.Completions.New(context.Background(), userMessage("hi"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 || !strings.Contains(apiErr.Message, "signature we calculated does not match") {
		t.Fatalf("got %v, want Bedrock's 403 InvalidSignatureException", err)
	}
}

func TestBedrockToolRoundTrip(t *testing.T) {
	up, gw := startBedrock(t, mockllm.Options{}, awsSecret)
	client := gw.client()
	ctx := context.Background()
	ask := openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris? @mock(tool=get_weather)")},
		Tools:    []openai.ChatCompletionToolUnionParam{bedrockWeatherTool},
	}
	got, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	calls := got.Choices[0].Message.ToolCalls
	if got.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" ||
		calls[0].Function.Arguments != `{"city":"mock"}` || calls[0].ID == "" {
		t.Fatalf("tool call %+v finish %q", calls, got.Choices[0].FinishReason)
	}

	// The same call streamed assembles to the same arguments.
	stream := client.Chat.Completions.NewStreaming(ctx, ask)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	sc := acc.Choices[0].Message.ToolCalls
	if len(sc) != 1 || sc[0].Function.Arguments != `{"city":"mock"}` || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("streamed tool call %+v finish %q", sc, acc.Choices[0].FinishReason)
	}

	// The result goes back; the emulator checks the toolResult answers
	// the toolUse of the previous turn, and the model answers in text.
	ask.Messages = append(ask.Messages, got.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temp_c":21}`, calls[0].ID))
	final, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if final.Choices[0].FinishReason != "stop" || !strings.Contains(final.Choices[0].Message.Content, `"temp_c":21`) {
		t.Fatalf("final %+v", final.Choices[0])
	}
	recs := up.mock.Requests()
	var sent struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(recs[len(recs)-1].Body, &sent)
	if len(sent.Messages) != 3 || sent.Messages[1].Content[0]["toolUse"] == nil || sent.Messages[2].Content[0]["toolResult"] == nil {
		t.Fatalf("converse history %s", recs[len(recs)-1].Body)
	}
}

func TestBedrockThrottling(t *testing.T) {
	_, gw := startBedrock(t, mockllm.Options{Chunks: 6}, awsSecret)
	client := gw.client()
	ctx := context.Background()

	// As a 429 before anything was sent: status, message and Retry-After kept.
	for _, streamed := range []bool{false, true} {
		params := userMessage("x @mock(error_status=429, retry_after=4)")
		var err error
		if streamed {
			s := client.Chat.Completions.NewStreaming(ctx, params)
			for s.Next() {
			}
			err = s.Err()
		} else {
			_, err = client.Chat.Completions.New(ctx, params)
		}
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests ||
			apiErr.Response.Header.Get("Retry-After") != "4" || !strings.Contains(apiErr.Message, "Too many requests") {
			t.Fatalf("streamed=%v: got %v, want a 429 with Retry-After 4", streamed, err)
		}
	}

	// Mid-stream: Bedrock sends a throttlingException event; the client
	// gets the text so far, then an error, never a clean finish.
	s := client.Chat.Completions.NewStreaming(ctx, userMessage("tell me more @mock(error_status=429, fail_after=2)"))
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	err := s.Err()
	if err == nil || !strings.Contains(err.Error(), "Too many requests") {
		t.Fatalf("mid-stream throttling: err %v", err)
	}
	if len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "" {
		t.Fatalf("before the error: %+v", acc.Choices)
	}
}

func TestBedrockAPIKey(t *testing.T) {
	up := startUpstream(t, mockllm.Options{BedrockAPIKey: "bedrock-api-key-xyz"})
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-xyz")
	gw := startGateway(t, `listen: 127.0.0.1:0
providers:
  - name: br
    type: bedrock
    base_url: `+up.URL+`
keys:
  - {key: `+clientKey+`, name: tester, project: qa}
models:
  - name: chat
    targets: [{provider: br, model: amazon.nova-lite-v1:0}]
`)
	client := gw.client()
	if _, err := client.Chat.Completions.New(context.Background(), userMessage("hi")); err != nil {
		t.Fatal(err)
	}
	recs := up.mock.Requests()
	if got := recs[len(recs)-1].Header.Get("Authorization"); got != "Bearer bedrock-api-key-xyz" {
		t.Fatalf("authorization %q", got)
	}
}

// TestBedrockKitchenSink sends the conformance suite's request that uses
// everything gatehouse translates (system and developer turns, an image,
// a tool call and its result, tools, stop, sampling, user) through the
// gateway: the emulator's Converse validation must accept the translation.
func TestBedrockKitchenSink(t *testing.T) {
	_, gw := startBedrock(t, mockllm.Options{}, awsSecret)
	body := strings.Replace(providertest.KitchenSink, `"model":"m"`, `"model":"chat"`, 1)
	for _, stream := range []bool{false, true} {
		b := body
		if stream {
			b = strings.Replace(b, "{", `{"stream":true,`, 1)
		}
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(out), "temp_c") {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, out)
		}
	}
}
