package mockllm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// sdkClient is the official openai-go client pointed at ts.
func sdkClient(ts string) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

// accumulate reads a stream from NewStreaming through the SDK's own
// ResponseAccumulator and returns the snapshot taken after the last delta
// (before the terminal event, whose output would override what the
// deltas built), the rebuilt response, and the events seen.
func accumulate(t *testing.T, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) (responses.ResponseAccumulatorSnapshot, *responses.Response, []string) {
	t.Helper()
	var acc responses.ResponseAccumulator
	var before responses.ResponseAccumulatorSnapshot
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		raw := ev.RawJSON()
		terminal := ev.Type == "response.completed" || ev.Type == "response.incomplete"
		if terminal {
			before = acc.Snapshot()
			// Without the terminal's output the accumulator must rebuild
			// it from the output_item.done events alone.
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(raw), &m); err != nil {
				t.Fatal(err)
			}
			var r map[string]json.RawMessage
			if err := json.Unmarshal(m["response"], &r); err != nil {
				t.Fatal(err)
			}
			r["output"] = json.RawMessage("null")
			m["response"], _ = json.Marshal(r)
			b, _ := json.Marshal(m)
			raw = string(b)
		}
		var sev responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(raw), &sev); err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		if err := acc.AddEvent(sev); err != nil {
			t.Fatalf("accumulator refused %s: %v\n%s", ev.Type, err, raw)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	return before, rebuilt, types
}

// sameResponse compares a rebuilt streamed response with the plain one:
// all but ids and timestamps must agree.
func sameResponse(t *testing.T, got, want *responses.Response) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if gm, wm := string(maskResponses(g)), string(maskResponses(w)); gm != wm {
		t.Errorf("the stream rebuilds\n%s\nbut the plain answer is\n%s", gm, wm)
	}
}

// TestResponsesSDK drives the emulator with OpenAI's official Go SDK: if
// its bytes were not what the real API sends, the SDK would say so.
func TestResponsesSDK(t *testing.T) {
	srv, ts := start(t, Options{Chunks: 4})
	client := sdkClient(ts.URL)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:        "gpt-4.1",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello SDK")},
	}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	const want = "Hello from mockllm, the gatehouse test upstream. You said: Hello SDK"
	if resp.OutputText() != want || resp.Status != responses.ResponseStatusCompleted || !strings.HasPrefix(resp.ID, "resp_") {
		t.Fatalf("response %s", resp.RawJSON())
	}
	u := resp.Usage
	if u.InputTokens <= 0 || u.OutputTokens != 11 || u.TotalTokens != u.InputTokens+u.OutputTokens || u.OutputTokensDetails.ReasoningTokens != 0 {
		t.Errorf("usage %s", u.RawJSON())
	}
	if resp.Instructions.OfString != "Be brief." || resp.Model != "gpt-4.1" || resp.Temperature != 1 || resp.TopP != 1 {
		t.Errorf("echo %s", resp.RawJSON())
	}

	before, rebuilt, types := accumulate(t, client.Responses.NewStreaming(ctx, params))
	if before.OutputText() != want || len(types) != 4+4+4 || types[len(types)-1] != "response.completed" {
		t.Fatalf("deltas build %q in %v", before.OutputText(), types)
	}
	if rebuilt.OutputText() != want || rebuilt.Usage.OutputTokens != u.OutputTokens || rebuilt.Usage.InputTokens != u.InputTokens {
		t.Fatalf("rebuilt %s", rebuilt.RawJSON())
	}
	sameResponse(t, rebuilt, resp)
	if st := srv.Stats(); st.Completed != 2 || st.Errors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestResponsesSDKFunctionCall runs a client's tool loop: the model
// calls the function, the client answers with its output, the model
// replies in text.
func TestResponsesSDKFunctionCall(t *testing.T) {
	_, ts := start(t, Options{Chunks: 3})
	client := sdkClient(ts.URL)
	ctx := context.Background()
	weather := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
		"required":   []string{"city", "days"},
	}, true)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Weather in Paris? @mock(tool=get_weather)", responses.EasyInputMessageRoleUser)}
	params := responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: []responses.ToolUnionParam{weather}}

	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.OutputText() != "" {
		t.Fatalf("output %s", resp.RawJSON())
	}
	call := resp.Output[0].AsFunctionCall()
	if call.Type != "function_call" || call.Name != "get_weather" || call.Arguments != `{"city":"mock","days":1}` ||
		!strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") || call.Status != "completed" {
		t.Fatalf("call %s", resp.Output[0].RawJSON())
	}
	if resp.Usage.OutputTokens == 0 {
		t.Errorf("usage %s", resp.Usage.RawJSON())
	}

	before, rebuilt, types := accumulate(t, client.Responses.NewStreaming(ctx, params))
	if got := before.Output; len(got) != 1 || got[0].Arguments != call.Arguments || got[0].Name != "get_weather" {
		t.Fatalf("deltas build %+v in %v", got, types)
	}
	sameResponse(t, rebuilt, resp)

	// The function's output goes back; the model answers in text.
	params.Input.OfInputItemList = append(input,
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
		callOutput(call.CallID, `{"temp_c":21}`))
	final, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(final.OutputText(), "Hello from mockllm") || final.Output[0].Type != "message" {
		t.Fatalf("final %s", final.RawJSON())
	}

	// An output for a call the input does not hold is OpenAI's 400.
	params.Input.OfInputItemList = append(input, callOutput("call_nope", "x"))
	_, err = client.Responses.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" ||
		apiErr.Message != "No tool call found for function call output with call_id call_nope." {
		t.Fatalf("got %v", err)
	}
}

// TestResponsesSDKReasoning checks a reasoning model's items and usage,
// and structured output, through the SDK.
func TestResponsesSDKReasoning(t *testing.T) {
	_, ts := start(t, Options{Chunks: 2})
	client := sdkClient(ts.URL)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:     "o4-mini",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Who?")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto},
		Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("person", map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}},
			"required": []string{"name", "age"}, "additionalProperties": false,
		})},
	}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 2 || resp.Output[0].Type != "reasoning" {
		t.Fatalf("output %s", resp.RawJSON())
	}
	rs := resp.Output[0].AsReasoning()
	if len(rs.Summary) != 1 || rs.Summary[0].Type != "summary_text" || rs.Summary[0].Text == "" || !strings.HasPrefix(rs.EncryptedContent, "gAAAA") {
		t.Errorf("reasoning %s", resp.Output[0].RawJSON())
	}
	var person struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	if err := json.Unmarshal([]byte(resp.OutputText()), &person); err != nil || person.Name == "" || person.Age == 0 {
		t.Errorf("structured output %q: %v", resp.OutputText(), err)
	}
	u := resp.Usage
	if r := u.OutputTokensDetails.ReasoningTokens; r == 0 || u.OutputTokens <= r {
		t.Errorf("usage %s: reasoning tokens are counted inside output_tokens", u.RawJSON())
	}
	if resp.Reasoning.Effort != shared.ReasoningEffortLow || resp.Text.Format.Type != "json_schema" || resp.Text.Format.Name != "person" {
		t.Errorf("echo %s", resp.RawJSON())
	}
	before, rebuilt, types := accumulate(t, client.Responses.NewStreaming(ctx, params))
	if before.OutputText() != resp.OutputText() || !contains(types, "response.reasoning_summary_text.delta") {
		t.Fatalf("deltas build %q in %v", before.OutputText(), types)
	}
	sameResponse(t, rebuilt, resp)
}

// TestResponsesSDKIncomplete: max_output_tokens cuts the reply, and the
// stream ends with response.incomplete.
func TestResponsesSDKIncomplete(t *testing.T) {
	_, ts := start(t, Options{})
	client := sdkClient(ts.URL)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "gpt-4o-mini", MaxOutputTokens: openai.Int(16),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(strings.Repeat("many words here ", 10))}}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusIncomplete || resp.IncompleteDetails.Reason != "max_output_tokens" ||
		resp.Usage.OutputTokens != 16 || resp.Output[0].Status != "incomplete" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	_, rebuilt, types := accumulate(t, client.Responses.NewStreaming(ctx, params))
	if types[len(types)-1] != "response.incomplete" {
		t.Fatalf("events %v", types)
	}
	sameResponse(t, rebuilt, resp)
}

// TestResponsesSDKErrors: errors reach the SDK as *openai.Error, and the
// routes that need a stored response say it is not found.
func TestResponsesSDKErrors(t *testing.T) {
	_, ts := start(t, Options{})
	client := sdkClient(ts.URL)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	var apiErr *openai.Error

	_, err := client.Responses.New(ctx, params, option.WithHeader("X-Mock-Error-Status", "429"), option.WithHeader("X-Mock-Retry-After", "0"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("got %v", err)
	}
	stream := client.Responses.NewStreaming(ctx, params, option.WithHeader("X-Mock-Error-Status", "500"))
	if stream.Next() || !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 500 {
		t.Fatalf("stream error %v", stream.Err())
	}
	params.PreviousResponseID = openai.String("resp_gone")
	if _, err = client.Responses.New(ctx, params); !errors.As(err, &apiErr) || apiErr.Param != "previous_response_id" ||
		apiErr.Code != "previous_response_not_found" {
		t.Fatalf("previous_response_id: %v", err)
	}
	_, err = client.Responses.Get(ctx, "resp_123", responses.ResponseGetParams{})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Message != "Response with id 'resp_123' not found." {
		t.Fatalf("get: %v", err)
	}
	if err = client.Responses.Delete(ctx, "resp_123"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("delete: %v", err)
	}
}

// TestResponsesSDKAzure sends the Responses API where openai-go's Azure
// mode sends it — the classic /openai/responses?api-version=… with an
// api-key header, the deployment as the model — without importing that
// package, whose Azure identity dependencies the module does not carry.
func TestResponsesSDKAzure(t *testing.T) {
	srv, ts := start(t, Options{APIKey: "az-key"})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/openai/"), option.WithQuery("api-version", "2025-04-01-preview"),
		option.WithHeader("Api-Key", "az-key"), option.WithMaxRetries(0))
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "prod-4o",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello azure")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "prod-4o" || !strings.HasSuffix(resp.OutputText(), "You said: hello azure") {
		t.Fatalf("response %s", resp.RawJSON())
	}
	recs := srv.Requests()
	if r := recs[len(recs)-1]; r.Path != "/openai/responses" || r.Header.Get("Api-Key") != "az-key" {
		t.Fatalf("the SDK sent %s %s %v", r.Method, r.Path, r.Header)
	}
}

func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
