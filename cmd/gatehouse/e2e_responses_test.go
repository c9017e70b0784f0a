package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"gatehouse/internal/mockllm"
)

// The Responses API must work whatever serves the model. These tests
// drive /v1/responses with the official openai-go client in front of each
// backend's emulator — text, streaming, a function-calling round trip
// (stateless and through previous_response_id), JSON schema and
// reasoning — and hold each backend's event stream to a golden file.

type responsesBackend struct {
	name  string
	model string
	start func(t *testing.T) (*upstream, *testGateway)
}

func responsesBackends() []responsesBackend {
	native := func(t *testing.T) (*upstream, *testGateway) {
		up := startUpstream(t, mockllm.Options{})
		return up, startGateway(t, nativeConfig(up, ""))
	}
	return []responsesBackend{
		// Pass-through: the backend's own Responses API.
		{"openai", "gpt", native},
		{"azure", "az", native},
		// Translated to chat completions and back.
		{"openai-compatible", "chat", func(t *testing.T) (*upstream, *testGateway) {
			up := startUpstream(t, mockllm.Options{})
			return up, startGateway(t, baseConfig(up, ""))
		}},
		{"anthropic", "chat", func(t *testing.T) (*upstream, *testGateway) {
			up := startUpstream(t, mockllm.Options{})
			return up, startGateway(t, anthropicConfig(up))
		}},
		{"gemini", "chat", func(t *testing.T) (*upstream, *testGateway) {
			return startGemini(t, mockllm.Options{})
		}},
		{"ollama", "local-chat", func(t *testing.T) (*upstream, *testGateway) {
			return startOllama(t, mockllm.Options{})
		}},
		{"bedrock", "chat", func(t *testing.T) (*upstream, *testGateway) {
			return startBedrock(t, mockllm.Options{}, awsSecret)
		}},
	}
}

func weatherFunction() responses.ToolUnionParam {
	return responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"city": map[string]any{"type": "string"}},
		"required":             []string{"city"},
		"additionalProperties": false,
	}, true)
}

func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// streamResponse runs a streamed request and returns the terminal
// response, the concatenated text deltas and the event types in order,
// checking the sequence numbers run from 0 without a gap.
func streamResponse(t *testing.T, client openai.Client, params responses.ResponseNewParams) (*responses.Response, string, []string) {
	t.Helper()
	s := client.Responses.NewStreaming(context.Background(), params)
	var text strings.Builder
	var types []string
	var final *responses.Response
	for n := int64(0); s.Next(); n++ {
		ev := s.Current()
		if ev.SequenceNumber != n {
			t.Fatalf("event %d (%s) has sequence_number %d", n, ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			final = &r
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if final == nil {
		t.Fatalf("no terminal event in %v", types)
	}
	return final, text.String(), types
}

func functionCalls(r *responses.Response) []responses.ResponseFunctionToolCall {
	var out []responses.ResponseFunctionToolCall
	for _, it := range r.Output {
		if it.Type == "function_call" {
			out = append(out, it.AsFunctionCall())
		}
	}
	return out
}

// outputAsInput hands a response's output items back as input, as a
// stateless client continues a conversation.
func outputAsInput(r *responses.Response) []responses.ResponseInputItemUnionParam {
	var in []responses.ResponseInputItemUnionParam
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			p := it.AsMessage().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
		case "function_call":
			p := it.AsFunctionCall().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
		case "reasoning":
			p := it.AsReasoning().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfReasoning: &p})
		}
	}
	return in
}

func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
		CallID: openai.String(callID),
		Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(output)},
	}}
}

func TestResponsesAcrossBackends(t *testing.T) {
	for _, b := range responsesBackends() {
		t.Run(b.name, func(t *testing.T) {
			up, gw := b.start(t)
			client := gw.client()
			ctx := context.Background()

			// Text, whole and streamed: the same answer and usage.
			params := responses.ResponseNewParams{Model: b.model, Input: textInput("Hello there"),
				Instructions: openai.String("Be brief."), Metadata: map[string]string{"team": "qa"}, User: openai.String("u-1"),
				Temperature: openai.Float(0.5), MaxOutputTokens: openai.Int(500)}
			resp, err := client.Responses.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != responses.ResponseStatusCompleted || !strings.Contains(resp.OutputText(), "Hello there") ||
				!strings.HasPrefix(resp.ID, "resp_") || resp.Object != "response" || resp.Metadata["team"] != "qa" {
				t.Fatalf("response %s", resp.RawJSON())
			}
			if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
				t.Fatalf("usage %s", resp.Usage.RawJSON())
			}
			final, deltas, _ := streamResponse(t, client, params)
			if final.OutputText() != resp.OutputText() || deltas != resp.OutputText() || final.Status != responses.ResponseStatusCompleted {
				t.Fatalf("streamed %q (deltas %q), whole %q", final.OutputText(), deltas, resp.OutputText())
			}
			if final.Usage.OutputTokens != resp.Usage.OutputTokens || final.ID == resp.ID {
				t.Fatalf("streamed usage %s id %s; whole %s id %s", final.Usage.RawJSON(), final.ID, resp.Usage.RawJSON(), resp.ID)
			}

			// A function call and its output, stateless (the output items
			// handed back) and streamed or not.
			for _, streamed := range []bool{false, true} {
				tp := responses.ResponseNewParams{Model: b.model, Input: textInput("Weather in Paris? @mock(tool=get_weather)"),
					Tools: []responses.ToolUnionParam{weatherFunction()}}
				var call *responses.Response
				if streamed {
					call, _, _ = streamResponse(t, client, tp)
				} else if call, err = client.Responses.New(ctx, tp); err != nil {
					t.Fatal(err)
				}
				calls := functionCalls(call)
				if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].CallID == "" || !strings.Contains(calls[0].Arguments, `"city"`) {
					t.Fatalf("streamed=%v: %s", streamed, call.RawJSON())
				}
				input := append([]responses.ResponseInputItemUnionParam{
					responses.ResponseInputItemParamOfMessage("Weather in Paris? @mock(tool=get_weather)", responses.EasyInputMessageRoleUser),
				}, outputAsInput(call)...)
				input = append(input, callOutput(calls[0].CallID, `{"temp_c": 21}`))
				tp.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
				answer, err := client.Responses.New(ctx, tp)
				if err != nil {
					t.Fatalf("streamed=%v: the tool output: %v", streamed, err)
				}
				if answer.OutputText() == "" || len(functionCalls(answer)) != 0 {
					t.Fatalf("streamed=%v: answer %s", streamed, answer.RawJSON())
				}
			}

			// A cap that cuts the answer: incomplete, and why.
			capped, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: b.model, MaxOutputTokens: openai.Int(16),
				Input: textInput("Tell me a long story about gateways, proxies, routers and the people who run them " + strings.Repeat("please ", 20))})
			if err != nil {
				t.Fatal(err)
			}
			if capped.Status != responses.ResponseStatusIncomplete || capped.IncompleteDetails.Reason != "max_output_tokens" || capped.OutputText() == "" {
				t.Fatalf("capped %s", capped.RawJSON())
			}

			// JSON schema: the backend is sent the schema in its dialect.
			jp := responses.ResponseNewParams{Model: b.model, Input: textInput("Where do I live? Lyon."),
				Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("place",
					map[string]any{"type": "object", "properties": map[string]any{"hometown": map[string]any{"type": "string"}},
						"required": []string{"hometown"}, "additionalProperties": false})}}
			if jr, err := client.Responses.New(ctx, jp); err != nil || jr.Status != responses.ResponseStatusCompleted {
				t.Fatalf("json_schema: %v", err)
			}
			if last := lastUpstream(t, up); !bytes.Contains(last.Body, []byte("hometown")) {
				t.Fatalf("the schema did not reach the backend: %s", last.Body)
			}
			if !strings.Contains(string(jsonOf(t, jp.Text)), `"name":"place"`) {
				t.Fatal("test setup: the schema has no name")
			}
		})
	}
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResponsesStored: store: true keeps a response in the key's project;
// previous_response_id continues it (the backend is sent the whole
// conversation); GET returns it and DELETE removes it; another project's
// key sees none of it.
func TestResponsesStored(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, anthropicConfig(up)+"admin_key: "+testAdminKey+"\n")
	adminPost(t, gw.URL, "/admin/projects", `{"name":"elsewhere"}`)
	other := adminPost(t, gw.URL, "/admin/keys", `{"project":"elsewhere","name":"other"}`)["key"].(string)
	client := gw.client()
	ctx := context.Background()

	// A thinking model calls a tool; the call is continued by id alone,
	// so the thinking block (and its signature, which Anthropic checks)
	// must come back from the store.
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "chat", Input: textInput("Weather in Paris? @mock(tool=get_weather)"),
		Tools:           []responses.ToolUnionParam{weatherFunction()},
		Reasoning:       openai.ReasoningParam{Effort: openai.ReasoningEffortLow},
		MaxOutputTokens: openai.Int(4000),
		Store:           openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Output) < 2 || first.Output[0].Type != "reasoning" || first.Output[0].AsReasoning().EncryptedContent != "" {
		t.Fatalf("first %s (reasoning first, no encrypted content unless included)", first.RawJSON())
	}
	calls := functionCalls(first)
	if len(calls) != 1 || !strings.Contains(first.RawJSON(), `"store":true`) {
		t.Fatalf("first %s", first.RawJSON())
	}
	got, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != first.ID || got.OutputText() != first.OutputText() || len(got.Output) != len(first.Output) {
		t.Fatalf("get: %v %s", err, got.RawJSON())
	}

	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "chat", PreviousResponseID: openai.String(first.ID),
		Input:           responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{callOutput(calls[0].CallID, "21C")}},
		Tools:           []responses.ToolUnionParam{weatherFunction()},
		Reasoning:       openai.ReasoningParam{Effort: openai.ReasoningEffortLow},
		MaxOutputTokens: openai.Int(4000),
		Store:           openai.Bool(true),
	})
	if err != nil {
		t.Fatalf("continuing: %v", err)
	}
	if second.PreviousResponseID != first.ID || second.OutputText() == "" {
		t.Fatalf("second %s", second.RawJSON())
	}
	_, sent := anthLastUpstream(t, up)
	msgs, _ := sent["messages"].([]any)
	if len(msgs) != 3 || !strings.Contains(string(jsonOf(t, msgs[1])), `"thinking"`) || !strings.Contains(string(jsonOf(t, msgs[2])), "21C") {
		t.Fatalf("the backend was sent %s", jsonOf(t, msgs))
	}

	// Another project's key: not found, and cannot delete or continue.
	stranger := gw.client(option.WithAPIKey(other))
	var apiErr *openai.Error
	if _, err := stranger.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("another project's GET: %v", err)
	}
	if err := stranger.Responses.Delete(ctx, first.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("another project's DELETE: %v", err)
	}
	_, err = stranger.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", PreviousResponseID: openai.String(first.ID), Input: textInput("hi")})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
		t.Fatalf("another project's continuation: %v", err)
	}

	if err := client.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET after DELETE: %v", err)
	}
	if got, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{}); err != nil || got.ID != second.ID {
		t.Fatalf("the second response went with the first: %v", err)
	}

	// Not stored unless asked: the gateway's default is stateless.
	plain, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: textInput("hi")})
	if err != nil || !strings.Contains(plain.RawJSON(), `"store":false`) {
		t.Fatalf("plain: %v", err)
	}
	if _, err := client.Responses.Get(ctx, plain.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("an unstored response: %v", err)
	}
}

// TestResponsesErrors: bad input is a 400 in OpenAI's shape, named, and
// nothing reaches the backend; an untranslatable built-in tool is refused
// by name, or dropped where the provider says drop_unsupported.
func TestResponsesErrors(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, anthropicConfig(up))
	for _, c := range []struct{ body, param string }{
		{`{"model":"chat"}`, "input"},
		{`{"model":"chat","input":[{"type":"function_call_output","call_id":"nope","output":"x"}]}`, "input"},
		{`{"model":"chat","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"chat","input":"hi","background":true}`, "background"},
		{`{"model":"chat","input":"hi","previous_response_id":"resp_missing"}`, "previous_response_id"},
	} {
		status, body := postJSON(t, gw.URL+"/v1/responses", c.body)
		var e struct {
			Error struct{ Param, Message, Type string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		want := 400
		if c.param == "previous_response_id" {
			want = 404
		}
		if status != want || e.Error.Param != c.param || e.Error.Message == "" {
			t.Errorf("%s: %d %s", c.body, status, body)
		}
	}
	if n := len(up.mock.Requests()); n != 0 {
		t.Fatalf("%d requests reached the backend", n)
	}
	status, body := postJSON(t, gw.URL+"/v1/responses", `{"model":"chat-drop","input":"hi","tools":[{"type":"web_search"}]}`)
	if status != 200 || !bytes.Contains(body, []byte(`"status":"completed"`)) {
		t.Fatalf("drop_unsupported: %d %s", status, body)
	}
}

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden event streams under testdata/responses")

// responseIDs are the values that differ from run to run in a stream:
// ids, times and prices.
var responseIDs = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(resp|msg|fc|rs)_[0-9a-f]+`), "${1}_ID"},
	{regexp.MustCompile(`"call_id":"[^"]*"`), `"call_id":"CALL"`},
	{regexp.MustCompile(`"(created_at|completed_at)":\d+`), `"${1}":0`},
	{regexp.MustCompile(`"cost":[0-9.e-]+`), `"cost":0`},
	{regexp.MustCompile(`"encrypted_content":"[^"]*"`), `"encrypted_content":"SIG"`},
}

// TestResponsesGoldenStreams holds the event stream of each backend —
// text, and a function call — to a golden file under testdata/responses.
func TestResponsesGoldenStreams(t *testing.T) {
	for _, b := range responsesBackends() {
		t.Run(b.name, func(t *testing.T) {
			_, gw := b.start(t)
			var all []byte
			for _, body := range []string{
				`{"model":"` + b.model + `","input":"Hello there","stream":true}`,
				`{"model":"` + b.model + `","input":"Weather? @mock(tool=get_weather)","stream":true,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`,
			} {
				status, out := postJSON(t, gw.URL+"/v1/responses", body)
				if status != 200 {
					t.Fatalf("%d %s", status, out)
				}
				for _, r := range responseIDs {
					out = r.re.ReplaceAll(out, []byte(r.with))
				}
				all = append(all, out...)
			}
			path := filepath.Join("testdata", "responses", b.name+".sse")
			if *updateGolden {
				if err := os.WriteFile(path, all, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-golden to create it)", err)
			}
			if d := cmp.Diff(string(want), string(all)); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

// TestResponsesLimitsCacheAndRecords: a Responses request is limited,
// priced, cached and recorded like a chat completion — rate-limit and
// cost headers, a priced usage, a cache hit with a fresh id (also for
// the same question asked as a chat completion), and one usage record
// per request whose tokens and cost are what the client saw.
func TestResponsesLimitsCacheAndRecords(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, usageConfig(up, "cache: {exact: {enabled: true, ttl: 1h}}\n"))
	client := gw.client(option.WithAPIKey("gh-usage-budgeted"))
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "chat", Input: textInput("What is a gateway?")}

	var raw *http.Response
	first, err := client.Responses.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	h := raw.Header
	if h.Get("X-Gatehouse-Cache") != "miss" || h.Get("X-Gatehouse-Cost-Usd") == "" || h.Get("X-Gatehouse-Provider") != "up" {
		t.Fatalf("headers %v", h)
	}
	if cost := first.Usage.JSON.ExtraFields["cost"].Raw(); cost != h.Get("X-Gatehouse-Cost-Usd") {
		t.Fatalf("usage cost %s, header %s", cost, h.Get("X-Gatehouse-Cost-Usd"))
	}
	firstID := h.Get("X-Gatehouse-Request-Id")

	hit, err := client.Responses.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("X-Gatehouse-Cache") != "hit" || hit.ID == first.ID || hit.OutputText() != first.OutputText() ||
		raw.Header.Get("X-Gatehouse-Cost-Usd") != "0.000000" {
		t.Fatalf("hit %s, headers %v", hit.RawJSON(), raw.Header)
	}
	// The same question as a chat completion finds the same entry.
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is a gateway?")}}, option.WithResponseInto(&raw))
	if err != nil || raw.Header.Get("X-Gatehouse-Cache") != "hit" || chat.Choices[0].Message.Content != first.OutputText() {
		t.Fatalf("chat after responses: %v, cache %q", err, raw.Header.Get("X-Gatehouse-Cache"))
	}
	if n := len(up.mock.Requests()); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}

	// Rate limits: the second request of a one-a-minute key is a 429 in
	// OpenAI's shape, with the headers.
	limited := gw.client(option.WithAPIKey("gh-usage-limited"))
	if _, err := limited.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: textInput("one")}); err != nil {
		t.Fatal(err)
	}
	_, err = limited.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: textInput("two")})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") == "" ||
		apiErr.Response.Header.Get("X-Ratelimit-Limit-Requests") != "1" {
		t.Fatalf("rate limited: %v", err)
	}

	// The record of the first request: its endpoint, tokens and cost.
	var rec struct {
		Endpoint         string `json:"endpoint"`
		PromptTokens     int    `json:"prompt_tokens"`
		CompletionTokens int    `json:"completion_tokens"`
		CostUSD          string `json:"cost_usd"`
		Cache            string `json:"cache"`
		Status           int    `json:"status"`
	}
	waitFor(t, 30*time.Second, "the usage record", func() bool {
		req, _ := http.NewRequest(http.MethodGet, gw.URL+"/admin/logs/"+firstID, nil)
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&rec) == nil
	})
	if rec.Endpoint != "/v1/responses" || rec.PromptTokens != int(first.Usage.InputTokens) || rec.CompletionTokens != int(first.Usage.OutputTokens) ||
		rec.CostUSD != h.Get("X-Gatehouse-Cost-Usd") || rec.Cache != "miss" || rec.Status != 200 {
		t.Fatalf("record %+v; the client saw %s and cost %s", rec, first.Usage.RawJSON(), h.Get("X-Gatehouse-Cost-Usd"))
	}
}

// TestResponsesStoredAcrossReplicas: in cluster mode a stored response
// lives in PostgreSQL, so any replica reads, continues and deletes what
// another created.
func TestResponsesStoredAcrossReplicas(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	storage := clusterStorage(t)
	a := startGateway(t, baseConfig(up, storage)).client()
	b := startGateway(t, baseConfig(up, storage)).client()
	ctx := context.Background()
	first, err := a.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: textInput("Remember the number 7."),
		Store: openai.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != first.OutputText() {
		t.Fatalf("the other replica's GET: %v", err)
	}
	second, err := b.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: textInput("Which number?"),
		PreviousResponseID: openai.String(first.ID)})
	if err != nil || second.PreviousResponseID != first.ID {
		t.Fatalf("continuing on the other replica: %v", err)
	}
	last := lastUpstream(t, up)
	if !bytes.Contains(last.Body, []byte("Remember the number 7.")) || !bytes.Contains(last.Body, []byte("Which number?")) {
		t.Fatalf("the backend was not sent the conversation: %s", last.Body)
	}
	if err := b.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := a.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET on the first replica after DELETE on the second: %v", err)
	}
}
