package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/providertest"
)

func deployment() provider.Deployment {
	return provider.Deployment{Provider: "az", Type: "azure", Model: "gpt4o-prod", BaseURL: "https://res.openai.azure.com",
		APIKey: "az-key", APIVersion: "2024-10-21", StreamUsage: true, Header: http.Header{}, Adapter: Adapter{}}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	sse   = http.Header{"Content-Type": {"text/event-stream"}}
	jsonH = http.Header{"Content-Type": {"application/json"}}
)

func TestConformance(t *testing.T) {
	weather := []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	providertest.Run(t, providertest.Suite{
		Type:       Type(),
		Deployment: deployment(),
		Text: providertest.Fixture{Header: jsonH, Body: fixture(t, "chat_completion.json"), Want: providertest.Want{
			Content: "Paris is the capital of France.", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 14, CompletionTokens: 8, TotalTokens: 22}}},
		TextStream: providertest.Fixture{Header: sse, Body: fixture(t, "chat_stream.sse"), Want: providertest.Want{
			Content: "Paris is the capital.", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 14, CompletionTokens: 5, TotalTokens: 19}}},
		Tool: providertest.Fixture{Header: jsonH, Body: fixture(t, "chat_tool.json"), Want: providertest.Want{
			ToolCalls: []llm.ToolCall{{ID: "call_az1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Finish: "tool_calls",
			Usage: llm.Usage{PromptTokens: 60, CompletionTokens: 15, TotalTokens: 75, CachedTokens: 32}}},
		ToolStream: providertest.Fixture{Header: sse, Body: fixture(t, "chat_tool_stream.sse"), Want: providertest.Want{
			ToolCalls: weather, Finish: "tool_calls",
			Usage: llm.Usage{PromptTokens: 60, CompletionTokens: 15, TotalTokens: 75, CachedTokens: 32}}},
		Errors: []providertest.ErrorFixture{
			{
				// Azure's rate limit: the OpenAI shape with a numeric-string code,
				// and both retry headers.
				Name: "rate_limit", Status: 429,
				Header:         http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"6500"}},
				Body:           []byte(`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 7 seconds."}}`),
				WantStatus:     429,
				WantMessage:    "have exceeded token rate limit",
				WantRetryAfter: 6500 * time.Millisecond,
			},
			{
				Name: "content_filter", Status: 400,
				Body:        []byte(`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"violence":{"filtered":true,"severity":"high"}}}}}`),
				WantStatus:  400,
				WantMessage: "Azure OpenAI's content management policy",
			},
			{
				Name: "bad_key", Status: 401,
				Body:        []byte(`{"statusCode":401,"message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}`),
				WantStatus:  401,
				WantMessage: "Access denied due to invalid subscription key",
			},
			{
				Name: "deployment_not_found", Status: 404,
				Body:        []byte(`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`),
				WantStatus:  404,
				WantMessage: "The API deployment for this resource does not exist",
			},
		},
	})
}

func TestContentFilterCodeIsKept(t *testing.T) {
	d := deployment()
	body := `{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","status":400}}`
	e := d.Adapter.Error(&http.Response{StatusCode: 400, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader([]byte(body)))}, &d)
	if e.Code != "content_filter" || e.Param != "prompt" || e.Message != "filtered" {
		t.Fatalf("error %+v", e)
	}
}

func TestContentFilterFinishPassesThrough(t *testing.T) {
	d := deployment()
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)
	got := providertest.Collect(t, providertest.OpenStream(t, &d, req,
		providertest.Fixture{Header: sse, Body: fixture(t, "chat_content_filter_stream.sse")}, false))
	if got.Finish != llm.FinishContentFilter {
		t.Fatalf("finish %q, want content_filter", got.Finish)
	}
}

func TestEndpoint(t *testing.T) {
	for _, c := range []struct {
		base, version, op, want string
	}{
		{"https://res.openai.azure.com", "2024-10-21", "/chat/completions",
			"https://res.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21"},
		{"https://res.openai.azure.com/openai/", "2024-10-21", "/embeddings",
			"https://res.openai.azure.com/openai/deployments/gpt4o-prod/embeddings?api-version=2024-10-21"},
		{"https://res.openai.azure.com/openai/v1", "2024-10-21", "/chat/completions",
			"https://res.openai.azure.com/openai/v1/chat/completions"},
		{"https://res.openai.azure.com/openai/v1/", "", "/embeddings",
			"https://res.openai.azure.com/openai/v1/embeddings"},
		{"http://127.0.0.1:9", "", "/chat/completions",
			"http://127.0.0.1:9/openai/deployments/gpt4o-prod/chat/completions"},
	} {
		d := deployment()
		d.BaseURL, d.APIVersion = c.base, c.version
		if got := Endpoint(&d, c.op); got != c.want {
			t.Errorf("Endpoint(%s, %q, %s) = %s, want %s", c.base, c.version, c.op, got, c.want)
		}
	}
	d := deployment()
	d.Model = "my deployment/1"
	if got := Endpoint(&d, "/chat/completions"); got != "https://res.openai.azure.com/openai/deployments/my%20deployment%2F1/chat/completions?api-version=2024-10-21" {
		t.Errorf("deployment name not path-escaped: %s", got)
	}
}

func TestChatRequestAuthenticatesWithAPIKeyHeader(t *testing.T) {
	d := deployment()
	d.Header.Set("X-Extra", "1")
	req := providertest.MustRequest(t, `{"model":"alias","messages":[{"role":"user","content":"hi"}]}`, true)
	up, err := d.Adapter.ChatRequest(context.Background(), &d, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := up.Header.Get("Api-Key"); got != "az-key" {
		t.Errorf("api-key %q", got)
	}
	if got := up.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization %q sent: Azure keys go in api-key", got)
	}
	if up.Header.Get("X-Extra") != "1" || up.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("headers %v", up.Header)
	}
	body, _ := io.ReadAll(up.Body)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"model": "gpt4o-prod", "stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []any{map[string]any{"role": "user", "content": "hi"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestEmbedRequest(t *testing.T) {
	d := deployment()
	d.BaseURL = "https://res.openai.azure.com/openai/v1"
	req, err := llm.ParseEmbedRequest([]byte(`{"model":"alias","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	up, err := Adapter{}.EmbedRequest(context.Background(), &d, req)
	if err != nil {
		t.Fatal(err)
	}
	if up.URL.String() != "https://res.openai.azure.com/openai/v1/embeddings" || up.Header.Get("Api-Key") != "az-key" {
		t.Fatalf("%s %v", up.URL, up.Header)
	}
	body, _ := io.ReadAll(up.Body)
	if string(body) != `{"model":"gpt4o-prod","input":"hi"}` {
		t.Fatalf("body %s: the v1 API takes the deployment as model", body)
	}
}

// TestResponsesAPI: Responses requests go to Azure's own API where the
// api-version has it, at the resource's /openai/responses (classic) or
// the v1 base, with the api-key header; older versions are translated.
func TestResponsesAPI(t *testing.T) {
	reg := &provider.Registry{}
	reg.Register(Type())
	yes, no := true, false
	for _, c := range []struct {
		base, version string
		setting       *bool
		native        bool
		url           string
	}{
		{"https://r.openai.azure.com", "", nil, false, "https://r.openai.azure.com/openai/responses?api-version=2024-10-21"},
		{"https://r.openai.azure.com/openai", "2025-04-01-preview", nil, true, "https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview"},
		{"https://r.openai.azure.com/openai/v1", "", nil, true, "https://r.openai.azure.com/openai/v1/responses"},
		{"https://r.openai.azure.com/openai/v1", "", &no, false, "https://r.openai.azure.com/openai/v1/responses"},
		{"https://r.openai.azure.com", "2024-10-21", &yes, true, "https://r.openai.azure.com/openai/responses?api-version=2024-10-21"},
	} {
		d, _, err := reg.Deployment(provider.Settings{Name: "az", Type: "azure", BaseURL: c.base, APIVersion: c.version, APIKey: "k", ResponsesAPI: c.setting})
		if err != nil {
			t.Fatal(err)
		}
		if d.ResponsesAPI != c.native {
			t.Errorf("%s %s %v: native %v, want %v", c.base, c.version, c.setting, d.ResponsesAPI, c.native)
		}
		d.Model = "my-deployment"
		r, err := Adapter{}.ResponsesRequest(context.Background(), &d, []byte(`{"model":"my-deployment"}`), true)
		if err != nil {
			t.Fatal(err)
		}
		if r.URL.String() != c.url || r.Header.Get("Api-Key") != "k" || r.Header.Get("Authorization") != "" || r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("%s: %s %v", c.base, r.URL, r.Header)
		}
	}
}
