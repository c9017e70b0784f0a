package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"gatehouse/internal/mockllm"
)

// Pass-through: deployments whose server speaks the Responses API get
// the client's body and relay the answer as it came. These tests run the
// official client against cmd/mockllm's OpenAI and Azure emulation of
// POST /v1/responses.

// nativeConfig serves "gpt" and "o4" from an OpenAI provider, "az" from
// Azure's v1 API, "az-classic" from an Azure api-version without the
// Responses API (translated), and "mixed": a failing OpenAI deployment
// with an Anthropic fallback.
func nativeConfig(up *upstream, extra string) string {
	return `listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
providers:
  - {name: oa, type: openai, base_url: ` + up.URL + `/v1, api_key: ` + upstreamKey + `}
  - {name: oa-broken, type: openai, base_url: ` + up.URL + `/v1, api_key: ` + upstreamKey + `, headers: {X-Mock-Error-Status: "503"}}
  - {name: az, type: azure, base_url: ` + up.URL + `/openai/v1, api_key: ` + upstreamKey + `}
  - {name: az-classic, type: azure, base_url: ` + up.URL + `, api_key: ` + upstreamKey + `}
  - {name: claude, type: anthropic, base_url: ` + up.URL + `, api_key: ` + upstreamKey + `}
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - name: gpt
    targets: [{provider: oa, model: gpt-4.1-mini}]
  - name: o4
    targets: [{provider: oa, model: o4-mini}]
  - name: az
    targets: [{provider: az, model: my-gpt-deployment}]
  - name: az-classic
    targets: [{provider: az-classic, model: my-gpt-deployment}]
  - name: mixed
    retry: {max_attempts: 2}
    targets: [{provider: oa-broken, model: gpt-4.1-mini}, {provider: claude, model: claude-sonnet-4-5}]
` + extra
}

// upstreamPaths lists the paths the emulator was called on, in order.
func upstreamPaths(up *upstream) []string {
	var out []string
	for _, r := range up.mock.Requests() {
		out = append(out, r.Path)
	}
	return out
}

func TestResponsesPassThrough(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, nativeConfig(up, ""))
	client := gw.client()
	ctx := context.Background()

	// Whole and streamed: the body goes as sent, with the deployment's
	// model; the answer comes back as the backend wrote it.
	params := responses.ResponseNewParams{Model: "gpt", Input: textInput("Hello there"), Instructions: openai.String("Be brief."),
		Metadata: map[string]string{"team": "qa"}}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	last := lastUpstream(t, up)
	if last.Path != "/v1/responses" || !bytes.Contains(last.Body, []byte(`"model":"gpt-4.1-mini"`)) ||
		!bytes.Contains(last.Body, []byte(`"instructions":"Be brief."`)) || last.Header.Get("Authorization") != "Bearer "+upstreamKey {
		t.Fatalf("upstream got %s %s %v", last.Path, last.Body, last.Header)
	}
	if !strings.Contains(resp.OutputText(), "Hello there") || resp.Status != responses.ResponseStatusCompleted || resp.Usage.OutputTokens == 0 ||
		resp.Usage.JSON.ExtraFields["cost"].Raw() == "" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	final, deltas, types := streamResponse(t, client, params)
	if deltas != final.OutputText() || !strings.Contains(deltas, "Hello there") || types[0] != "response.created" ||
		types[len(types)-1] != "response.completed" {
		t.Fatalf("stream %v %q", types, deltas)
	}

	// A function call, continued statelessly and through the store (the
	// emulator refuses previous_response_id: the gateway must send the
	// conversation instead).
	tp := responses.ResponseNewParams{Model: "gpt", Input: textInput("Weather in Paris? @mock(tool=get_weather)"),
		Tools: []responses.ToolUnionParam{weatherFunction()}, Store: openai.Bool(true)}
	call, err := client.Responses.New(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	calls := functionCalls(call)
	if len(calls) != 1 || calls[0].Name != "get_weather" {
		t.Fatalf("call %s", call.RawJSON())
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt", PreviousResponseID: openai.String(call.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{callOutput(calls[0].CallID, "21C")}},
		Tools: []responses.ToolUnionParam{weatherFunction()}})
	if err != nil {
		t.Fatalf("continuing a pass-through response: %v", err)
	}
	sent := lastUpstream(t, up).Body
	if bytes.Contains(sent, []byte("previous_response_id")) || !bytes.Contains(sent, []byte(`"Weather in Paris? @mock(tool=get_weather)"`)) ||
		!bytes.Contains(sent, []byte(`"function_call_output"`)) || next.OutputText() == "" {
		t.Fatalf("continuation sent %s, answered %s", sent, next.RawJSON())
	}
	if got, err := client.Responses.Get(ctx, call.ID, responses.ResponseGetParams{}); err != nil || got.ID != call.ID {
		t.Fatalf("GET of a stored pass-through response: %v", err)
	}

	// A reasoning model: its reasoning item and tokens come through.
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "o4", Input: textInput("Think, then answer."),
		Reasoning: openai.ReasoningParam{Effort: openai.ReasoningEffortLow, Summary: openai.ReasoningSummaryAuto}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) < 2 || r.Output[0].Type != "reasoning" || r.Usage.OutputTokensDetails.ReasoningTokens == 0 || r.OutputText() == "" {
		t.Fatalf("reasoning %s", r.RawJSON())
	}

	// JSON schema: the answer parses.
	j, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt", Input: textInput("Where? Lyon."),
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("place",
			map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required": []string{"city"}, "additionalProperties": false})}})
	if err != nil {
		t.Fatal(err)
	}
	var place map[string]any
	if err := json.Unmarshal([]byte(j.OutputText()), &place); err != nil || place["city"] == nil {
		t.Fatalf("json_schema answer %q: %v", j.OutputText(), err)
	}

	// Built-in tools are the backend's business on a pass-through
	// deployment: sent, not refused.
	before := len(up.mock.Requests())
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt", Input: textInput("x"),
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
	if len(up.mock.Requests()) != before+1 {
		t.Fatalf("a built-in tool was not sent to the pass-through backend: %v", err)
	}
}

// TestResponsesPassThroughAzure: Azure's v1 API gets the body at
// /openai/v1/responses with the api-key header; a classic api-version
// without the Responses API is served by translation to chat
// completions.
func TestResponsesPassThroughAzure(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, nativeConfig(up, ""))
	client := gw.client()
	ctx := context.Background()
	for _, c := range []struct{ model, path string }{
		{"az", "/openai/v1/responses"},
		{"az-classic", "/openai/deployments/my-gpt-deployment/chat/completions"},
	} {
		for _, stream := range []bool{false, true} {
			p := responses.ResponseNewParams{Model: c.model, Input: textInput("Hello Azure")}
			var text string
			if stream {
				final, deltas, _ := streamResponse(t, client, p)
				text = final.OutputText()
				if deltas != text {
					t.Fatalf("%s: deltas %q, final %q", c.model, deltas, text)
				}
			} else {
				resp, err := client.Responses.New(ctx, p)
				if err != nil {
					t.Fatalf("%s: %v", c.model, err)
				}
				text = resp.OutputText()
			}
			last := lastUpstream(t, up)
			if last.Path != c.path || last.Header.Get("Api-Key") != upstreamKey || !strings.Contains(text, "Hello Azure") {
				t.Fatalf("%s: upstream %s %v, text %q", c.model, last.Path, last.Header, text)
			}
		}
	}
}

// TestResponsesFailoverAcrossKinds: a pass-through deployment that fails
// before answering hands the request to a translated one.
func TestResponsesFailoverAcrossKinds(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, nativeConfig(up, ""))
	var raw *http.Response
	client := gw.client()
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "mixed", Input: textInput("Hello")},
		option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	paths := upstreamPaths(up)
	if len(paths) != 2 || paths[0] != "/v1/responses" || paths[1] != "/v1/messages" || raw.Header.Get("X-Gatehouse-Provider") != "claude" ||
		raw.Header.Get("X-Gatehouse-Attempts") != "2" || !strings.Contains(resp.OutputText(), "Hello") {
		t.Fatalf("paths %v, headers %v, %s", paths, raw.Header, resp.RawJSON())
	}
}

// TestResponsesPassThroughCached: a pass-through answer is kept as a
// chat completion; the same request, and the same question as a chat
// completion, are hits.
func TestResponsesPassThroughCached(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, nativeConfig(up, "cache: {exact: {enabled: true, ttl: 1h}}\n"))
	client := gw.client()
	ctx := context.Background()
	p := responses.ResponseNewParams{Model: "gpt", Input: textInput("Cache me")}
	var raw *http.Response
	first, err := client.Responses.New(ctx, p, option.WithResponseInto(&raw))
	if err != nil || raw.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("%v %v", err, raw.Header)
	}
	for _, stream := range []bool{false, true} {
		var got *responses.Response
		if stream {
			got, _, _ = streamResponse(t, client, p)
		} else if got, err = client.Responses.New(ctx, p, option.WithResponseInto(&raw)); err != nil || raw.Header.Get("X-Gatehouse-Cache") != "hit" {
			t.Fatalf("%v %v", err, raw.Header)
		}
		if got.OutputText() != first.OutputText() || got.ID == first.ID {
			t.Fatalf("stream=%v: hit %s, first %s", stream, got.RawJSON(), first.RawJSON())
		}
	}
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Cache me")}}, option.WithResponseInto(&raw))
	if err != nil || raw.Header.Get("X-Gatehouse-Cache") != "hit" || chat.Choices[0].Message.Content != first.OutputText() {
		t.Fatalf("chat: %v %v", err, raw.Header)
	}
	if n := len(up.mock.Requests()); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
	// A built-in tool is not in the chat form the cache keys by: such a
	// request bypasses the cache rather than get the answer to another.
	p.Tools = []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}
	_, _ = client.Responses.New(ctx, p, option.WithResponseInto(&raw))
	if raw.Header.Get("X-Gatehouse-Cache") != "bypass" || len(up.mock.Requests()) != 2 {
		t.Fatalf("with a built-in tool: cache %q, %d upstream calls", raw.Header.Get("X-Gatehouse-Cache"), len(up.mock.Requests()))
	}
}
