package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

const kitchenSink = `{"model":"m","messages":[` +
	`{"role":"system","content":"You are terse."},` +
	`{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]},` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"{\"temp_c\":21}"}],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object"}}}],` +
	`"tool_choice":{"type":"function","function":{"name":"get_weather"}},"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"},"strict":true}},` +
	`"temperature":0.2,"top_p":0.9,"max_tokens":256,"stop":"END","user":"u-1","seed":7,"stream":true,"stream_options":{"include_usage":true},"logit_bias":{"50256":-100}}`

func TestDecodeChatParams(t *testing.T) {
	p, err := DecodeChatParams([]byte(kitchenSink))
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "m" || len(p.Messages) != 4 || p.MaxTokens != 256 || !p.Stream || !p.IncludeUsage || p.User != "u-1" || *p.Seed != 7 {
		t.Fatalf("scalars: %+v", p)
	}
	if got := p.Messages[1].Content; len(got) != 2 || got[1].ImageURL != "data:image/png;base64,iVBORw0KGgo=" || got[1].ImageDetail != "low" {
		t.Fatalf("image part: %+v", got)
	}
	if m := p.Messages[2]; m.Content != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Arguments != `{"city":"Paris"}` {
		t.Fatalf("assistant tool call: %+v", m)
	}
	if m := p.Messages[3]; m.ToolCallID != "call_1" || m.TextContent() != `{"temp_c":21}` {
		t.Fatalf("tool result: %+v", m)
	}
	if p.ToolChoice.Mode != ToolChoiceFunction || p.ToolChoice.Name != "get_weather" {
		t.Fatalf("tool choice: %+v", p.ToolChoice)
	}
	if rf := p.ResponseFormat; rf.Type != FormatJSONSchema || rf.Name != "w" || string(rf.Schema) != `{"type":"object"}` || !*rf.Strict {
		t.Fatalf("response format: %+v", rf)
	}
	if !reflect.DeepEqual(p.Stop, []string{"END"}) || *p.Temperature != 0.2 {
		t.Fatalf("stop/temperature: %+v", p)
	}
	if string(p.Other["logit_bias"]) != `{"50256":-100}` {
		t.Fatalf("other: %v", p.Other)
	}

	// Encoding and decoding again keeps everything.
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeChatParams(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if !reflect.DeepEqual(p, again) {
		t.Fatalf("round trip differs:\n%+v\n%+v\n%s", p, again, body)
	}
}

func TestDecodeChatParamsErrors(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{`{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content"},
		{`{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"model":"m","messages":[],"tool_choice":"sometimes"}`, "tool_choice"},
		{`{"model":"m","messages":[],"temperature":"hot"}`, "temperature"},
		{`{"model":"m","messages":[],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{`{"model":"m","messages":[],"response_format":{"type":"yaml"}}`, "response_format.type"},
	} {
		_, err := DecodeChatParams([]byte(tc.body))
		e, ok := err.(*Error)
		if !ok || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: got %v (param %q), want a 400 for %s", tc.body, err, paramOf(e), tc.param)
		}
	}
}

func paramOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Param
}

func TestNewChatRequestMapsBudgetToEffort(t *testing.T) {
	p := &ChatParams{Model: "m", Messages: []Message{{Role: RoleUser, Content: []Part{{Type: PartText, Text: "hi"}}}}, ThinkingBudget: 4000}
	r, err := NewChatRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r.Params()
	if got != p {
		t.Fatal("Params does not return the params the request was built from")
	}
	if want := `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"medium"}`; string(r.Body) != want {
		t.Fatalf("body %s, want %s", r.Body, want)
	}
}

func TestDataURL(t *testing.T) {
	mt, data, ok := DataURL("data:image/png;base64,AAAA")
	if !ok || mt != "image/png" || data != "AAAA" {
		t.Fatalf("%q %q %v", mt, data, ok)
	}
	if _, _, ok := DataURL("https://example.com/a.png"); ok {
		t.Fatal("http URL taken for a data URL")
	}
}
