package messages

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
	"gatehouse/internal/llm/llmtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, path string, got []byte) []byte {
	t.Helper()
	return llmtest.Golden(t, path, got, *update)
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// TestParseRequestGolden translates each Anthropic request under
// testdata/requests into the OpenAI body adapters receive, compared with
// its .openai.json golden file.
func TestParseRequestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/requests/*.json")
	n := 0
	for _, in := range files {
		if strings.HasSuffix(in, ".openai.json") {
			continue
		}
		n++
		t.Run(filepath.Base(in), func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			req, err := ParseRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			got := indent(t, req.Body)
			want := golden(t, strings.TrimSuffix(in, ".json")+".openai.json", got)
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("OpenAI body (-want +got):\n%s", d)
			}
			// The body must be one the gateway's own OpenAI parser takes.
			if _, err := llm.ParseChatRequest(req.Body); err != nil {
				t.Errorf("translated body does not parse: %v", err)
			}
		})
	}
	if n < 4 {
		t.Fatalf("found only %d request fixtures", n)
	}
}

func TestParseRequestFields(t *testing.T) {
	req, err := ParseRequest([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":64,"model":"m","stream":true,"system":"s","metadata":{"user_id":"u"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "m" || !req.Stream || req.MaxTokens != 64 || req.User != "u" || req.IncludeUsage {
		t.Fatalf("request %+v", req)
	}
	p, _ := req.Params()
	if len(p.Messages) != 2 || p.Messages[0].Role != llm.RoleSystem {
		t.Fatalf("system must lead even when it comes last: %+v", p.Messages)
	}
}

func TestParseRequestErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body, param, msg string
	}{
		{"no max_tokens", `{"model":"m",` + msgs + `}`, "max_tokens", "max_tokens: Field required"},
		{"no model", `{"max_tokens":5,` + msgs + `}`, "model", "model: Field required"},
		{"no messages", `{"model":"m","max_tokens":5}`, "messages", "messages: Field required"},
		{"zero max_tokens", `{"model":"m","max_tokens":0,` + msgs + `}`, "max_tokens", "greater than or equal to 1"},
		{"max_tokens string", `{"model":"m","max_tokens":"5",` + msgs + `}`, "max_tokens", "max_tokens: Input should be a valid integer"},
		{"empty messages", `{"model":"m","max_tokens":5,"messages":[]}`, "messages", "at least one message"},
		{"system role", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, "messages.0.role", "'user' or 'assistant'"},
		{"no content", `{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`, "messages.0.content", "Field required"},
		{"document", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]}`, "messages.0.content.0.type", `"document" blocks are not supported`},
		{"image no source", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages.0.content.0.source", "Field required"},
		{"image bad media", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/tiff","data":"x"}}]}]}`, "messages.0.content.0.source.media_type", "image/jpeg"},
		{"image file", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages.0.content.0.source.type", "Files API"},
		{"tool_use in user", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}]}`, "messages.0.content.0.type", "not allowed in user turns"},
		{"tool_result no id", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id", "Field required"},
		{"tool input array", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":[1]}]}]}`, "messages.0.content.0.input", "valid object"},
		{"server tool", `{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools.0.type", `server tool "web_search_20250305"`},
		{"bash tool", `{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"type":"bash_20250124","name":"bash"}]}`, "tools.0.type", "not supported by gatehouse"},
		{"tool no schema", `{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"name":"f"}]}`, "tools.0.input_schema", "Field required"},
		{"tool_choice bad", `{"model":"m","max_tokens":5,` + msgs + `,"tool_choice":{"type":"sometimes"}}`, "tool_choice.type", "'auto', 'any', 'tool' or 'none'"},
		{"tool_choice no name", `{"model":"m","max_tokens":5,` + msgs + `,"tool_choice":{"type":"tool"}}`, "tool_choice.name", "Field required"},
		{"thinking small", `{"model":"m","max_tokens":5000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":100}}`, "thinking.budget_tokens", "1024"},
		{"thinking over max", `{"model":"m","max_tokens":2000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":4000}}`, "max_tokens", "greater than thinking.budget_tokens"},
		{"unknown field", `{"model":"m","max_tokens":5,` + msgs + `,"frequency_penalty":1}`, "frequency_penalty", "Extra inputs are not permitted"},
		{"mcp", `{"model":"m","max_tokens":5,` + msgs + `,"mcp_servers":[]}`, "mcp_servers", "not supported by gatehouse"},
		{"system number", `{"model":"m","max_tokens":5,` + msgs + `,"system":5}`, "system", "valid string or a list"},
		{"not json", `{"model":`, "", "not valid JSON"},
		{"an array", `[{"model":"m"}]`, "", "The request body must be a JSON object."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(c.body))
			e, ok := err.(*llm.Error)
			if !ok {
				t.Fatalf("got %v, want *llm.Error", err)
			}
			if e.Status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.msg) {
				t.Errorf("got %d param %q message %q; want param %q message containing %q", e.Status, e.Param, e.Message, c.param, c.msg)
			}
			if ErrorType(e) != "invalid_request_error" {
				t.Errorf("type %s", ErrorType(e))
			}
		})
	}
}

func TestParseCountRequest(t *testing.T) {
	p, err := ParseCountRequest([]byte(`{"model":"m","system":"s","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "m" || len(p.Messages) != 2 || len(p.Tools) != 1 {
		t.Fatalf("%+v", p)
	}
	if _, err := ParseCountRequest([]byte(`{"model":"m"}`)); err == nil {
		t.Fatal("messages must still be required")
	}
}

// TestEncodeMessageGolden turns each backend completion under
// testdata/responses into an Anthropic message, byte-exact.
func TestEncodeMessageGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/responses/*.openai.json")
	if len(files) < 4 {
		t.Fatalf("found only %d response fixtures", len(files))
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, slot, err := EncodeMessage(body, "msg_test", "requested-model")
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			llmtest.CheckSlot(t, got, slot)
			got = append(got, '\n')
			want := golden(t, strings.TrimSuffix(in, ".openai.json")+".anthropic.json", got)
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("message (-want +got):\n%s", d)
			}
		})
	}
}

func TestEncodeMessageStopReasons(t *testing.T) {
	cases := []struct{ finish, extra, want string }{
		{"stop", ``, `"stop_reason":"end_turn","stop_sequence":null`},
		{"length", ``, `"stop_reason":"max_tokens","stop_sequence":null`},
		{"tool_calls", ``, `"stop_reason":"tool_use"`},
		{"content_filter", ``, `"stop_reason":"refusal"`},
		{"malformed_tool_call", ``, `"stop_reason":"malformed_tool_call"`},
		{"error", ``, `"stop_reason":"error"`},
		{"stop", `,"stop_reason":"END"`, `"stop_reason":"stop_sequence","stop_sequence":"END"`},
		{"stop", `,"stop_reason":128001`, `"stop_reason":"end_turn","stop_sequence":null`},
	}
	for _, c := range cases {
		body := `{"model":"b","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"` + c.finish + `"` + c.extra + `}]}`
		got, _, err := EncodeMessage([]byte(body), "msg_1", "m")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), c.want) {
			t.Errorf("%s%s: %s lacks %s", c.finish, c.extra, got, c.want)
		}
	}
}

// Unparseable tool arguments are a 502, never a silent empty input.
func TestEncodeMessageBadArguments(t *testing.T) {
	for _, args := range []string{`{"city":`, `[1,2]`, `Paris`} {
		body := `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":` + strings.ReplaceAll(llmQuote(args), "", "") + `}}]},"finish_reason":"tool_calls"}]}`
		_, _, err := EncodeMessage([]byte(body), "msg_1", "m")
		e, ok := err.(*llm.Error)
		if !ok || e.Status != 502 || !strings.Contains(e.Message, `"get_weather"`) {
			t.Errorf("args %s: got %v", args, err)
		}
	}
	for _, body := range []string{`not json`, `{"choices":[]}`} {
		if _, _, err := EncodeMessage([]byte(body), "msg_1", "m"); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}

func llmQuote(s string) string { return string(llm.AppendQuote(nil, s)) }

func TestAppendError(t *testing.T) {
	cases := []struct {
		status int
		want   string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
		{404, "not_found_error"}, {413, "request_too_large"}, {415, "invalid_request_error"},
		{429, "rate_limit_error"}, {500, "api_error"}, {502, "api_error"}, {503, "overloaded_error"},
		{529, "overloaded_error"}, {504, "timeout_error"},
	}
	for _, c := range cases {
		got := string(AppendError(nil, &llm.Error{Status: c.status, Message: `say "hi"`}, "gh-1"))
		want := `{"type":"error","error":{"type":"` + c.want + `","message":"say \"hi\""},"request_id":"gh-1"}`
		if got != want {
			t.Errorf("%d: got %s want %s", c.status, got, want)
		}
	}
}
