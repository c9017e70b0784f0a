package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider/providertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/requests")

// TestTranslation checks the Converse body built for each OpenAI request
// against testdata/requests/<name>.json, compared as JSON values.
func TestTranslation(t *testing.T) {
	for _, c := range []struct {
		name, body string
		model      string // default: claude
	}{
		{name: "kitchen_sink", body: providertest.KitchenSink},
		{name: "system_and_developer", body: `{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"developer","content":[{"type":"text","text":"Use English."}]},{"role":"user","content":"hi"}]}`},
		{name: "multi_turn_merged", body: `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"user","content":"d"}]}`},
		{name: "parallel_tool_results", body: `{"model":"m","messages":[{"role":"user","content":"weather and time?"},` +
			`{"role":"assistant","content":"","tool_calls":[{"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"t2","type":"function","function":{"name":"get_time","arguments":""}}]},` +
			`{"role":"tool","tool_call_id":"t1","content":"{\"temp_c\":21}"},{"role":"tool","tool_call_id":"t2","content":"12:00"},{"role":"user","content":"thanks"}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"get_time","strict":true}}],"tool_choice":"required"}`},
		{name: "tool_choice_function", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"does f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
		{name: "tool_choice_none", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`},
		{name: "history_without_tools", body: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"[1,2]"}]}`},
		{name: "json_schema", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"answer","description":"the answer","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},"strict":true}}}`},
		{name: "reasoning_effort", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"medium"}`},
		{name: "reasoning_capped_by_max_tokens", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","max_completion_tokens":4000}`},
		{name: "reasoning_in_history", body: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"4","reasoning_content":"2+2","reasoning_signature":"sig"},{"role":"user","content":"and 3+3?"}]}`},
		{name: "metadata_and_user", body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"u-9","metadata":{"team":"qa"},"n":1,"parallel_tool_calls":true,"max_tokens":10,"stop":"END"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := deployment()
			if c.model != "" {
				d.Model = c.model
			}
			up, err := d.Adapter.ChatRequest(context.Background(), &d, providertest.MustRequest(t, c.body, false))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(up.Body)
			path := filepath.Join("testdata", "requests", c.name+".json")
			if *update {
				var pretty bytes.Buffer
				_ = json.Indent(&pretty, got, "", "  ")
				pretty.WriteByte('\n')
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("Converse body differs from %s:\ngot:  %s\nwant: %s", path, got, bytes.Join(bytes.Fields(want), nil))
			}
		})
	}
}

// TestRefusals checks what Converse cannot express is a clear 400 naming
// the parameter, and is dropped instead under drop_unsupported.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name, body, model string
		param             string
		droppable         bool
	}{
		{"http image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`, "", "messages[0].content[0].image_url.url", false},
		{"svg image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,PHN2Zz4="}}]}]}`, "", "messages[0].content[0].image_url.url", false},
		{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "", "messages[0].content[1] (type input_audio)", true},
		{"json_object", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, "", "response_format", true},
		{"seed", `{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":7}`, "", "seed", true},
		{"n", `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2}`, "", "n", true},
		{"logprobs", `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true}`, "", "logprobs", true},
		{"parallel_tool_calls false", `{"model":"m","messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":false}`, "", "parallel_tool_calls", true},
		{"unknown field", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"flex"}`, "", "service_tier", true},
		{"reasoning on a non-Claude model", `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}`, "amazon.nova-pro-v1:0", "reasoning_effort", true},
		{"tool_choice none after tool calls", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, "", "tool_choice", true},
		{"tool_choice unknown function", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, "", "tool_choice", false},
		{"arguments not an object", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"[1]"}}]},{"role":"tool","tool_call_id":"t1","content":"ok"}]}`, "", "messages[1].tool_calls[0].function.arguments", false},
		{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},{"role":"user","content":"hi"}]}`, "", "messages[0].content[0]", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := deployment()
			if c.model != "" {
				d.Model = c.model
			}
			req := providertest.MustRequest(t, c.body, false)
			_, err := d.Adapter.ChatRequest(context.Background(), &d, req)
			ge := llm.AsError(err)
			if err == nil || ge.Status != 400 || ge.Param != c.param || ge.Message == "" {
				t.Fatalf("got %v (param %q), want a 400 naming %q", err, ge.Param, c.param)
			}
			d.DropUnsupported = true
			_, err = d.Adapter.ChatRequest(context.Background(), &d, providertest.MustRequest(t, c.body, false))
			if c.droppable && err != nil {
				t.Fatalf("with drop_unsupported: %v", err)
			}
			if !c.droppable && err == nil {
				t.Fatal("with drop_unsupported the request passed, but this is not a droppable parameter")
			}
		})
	}
}
