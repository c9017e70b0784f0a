package mockllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var respUnstable = regexp.MustCompile(`\b(resp|msg|fc|rs)_[0-9a-f]{48}\b|\bcall_[0-9a-f]{24}\b|"(created_at|completed_at)":\d+`)

// maskResponses makes a Responses body reproducible: timestamps become 0
// and each id a numbered stand-in per prefix, the same id the same
// stand-in, so a fixture still shows which item an event is about.
func maskResponses(b []byte) []byte {
	seen := map[string]string{}
	count := map[string]int{}
	return respUnstable.ReplaceAllFunc(b, func(m []byte) []byte {
		s := string(m)
		if s[0] == '"' {
			k, _, _ := strings.Cut(s, ":")
			return []byte(k + ":0")
		}
		if r, ok := seen[s]; ok {
			return []byte(r)
		}
		prefix, _, _ := strings.Cut(s, "_")
		count[prefix]++
		r := prefix + "_ID" + strconv.Itoa(count[prefix])
		seen[s] = r
		return []byte(r)
	})
}

const (
	respWeather = `{"type":"function","name":"get_weather","description":"Current weather","parameters":{"type":"object",` +
		`"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}`
	respPerson = `{"type":"json_schema","name":"person","strict":true,"schema":{"type":"object","properties":` +
		`{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}}`
	respLong = `"Please write back a long reply about the weather, the sea, the hills, the town and the people who live there."`
)

// respEvent is one server-sent event of a Responses stream.
type respEvent struct {
	typ  string
	data json.RawMessage
}

// respEvents splits a stream into its events, failing on anything that
// is not exactly "event: T\ndata: {…}\n\n" with T the data's type and
// sequence numbers counting from 0.
func respEvents(t *testing.T, body []byte) []respEvent {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	var out []respEvent
	for ev := range strings.SplitSeq(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		head, data, ok := strings.Cut(ev, "\n")
		typ, ok1 := strings.CutPrefix(head, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		if !ok || !ok1 || !ok2 || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		var d struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if d.Type != typ || d.Seq == nil || *d.Seq != len(out) {
			t.Fatalf("event %d: type %q sequence_number %v under event %q", len(out), d.Type, d.Seq, typ)
		}
		if keys := keysInOrder(t, json.RawMessage(data)); keys[0] != "type" || keys[1] != "sequence_number" {
			t.Errorf("event %d starts with %v", len(out), keys)
		}
		out = append(out, respEvent{typ, json.RawMessage(data)})
	}
	return out
}

func respTypes(evs []respEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.typ)
	}
	return out
}

func TestResponsesGolden(t *testing.T) {
	cases := []struct {
		golden, path, body string
	}{
		{"responses_text.golden", "/v1/responses", `{"model":"gpt-4o-mini","instructions":"Be terse.","input":"Say <hi> & \"bye\" 👋",` +
			`"temperature":0.7,"top_p":1,"metadata":{"team":"qa"},"user":"u-1","store":false,"prompt_cache_key":"pck","safety_identifier":"sid"}`},
		{"responses_text_stream.golden", "/v1/responses", `{"model":"gpt-4o-mini","stream":true,"input":[` +
			`{"role":"developer","content":"Be terse."},{"type":"message","role":"user","content":[{"type":"input_text","text":"one two three"},` +
			`{"type":"input_image","image_url":"https://example.com/a.png","detail":"low"}]}]}`},
		{"responses_tool.golden", "/v1/responses", `{"model":"gpt-4.1","input":"Weather in Paris? @mock(tool=get_weather)","tools":[` + respWeather + `]}`},
		{"responses_tool_stream.golden", "/v1/responses", `{"model":"gpt-4.1","stream":true,"parallel_tool_calls":false,"input":"Weather?",` +
			`"tools":[` + respWeather + `],"tool_choice":{"type":"function","name":"get_weather"}}`},
		{"responses_reasoning.golden", "/v1/responses", `{"model":"o4-mini","input":"Think first","reasoning":{"effort":"low","summary":"auto"},` +
			`"include":["reasoning.encrypted_content"]}`},
		{"responses_reasoning_stream.golden", "/v1/responses", `{"model":"o4-mini","stream":true,"input":"Think first","reasoning":{"summary":"detailed"}}`},
		{"responses_json_schema.golden", "/v1/responses", `{"model":"gpt-4o","input":"A person, please","text":{"format":` + respPerson + `}}`},
		{"responses_incomplete.golden", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":` + respLong + `}`},
		{"responses_incomplete_stream.golden", "/v1/responses", `{"model":"gpt-4o-mini","stream":true,"max_output_tokens":16,"input":` + respLong + `}`},
		{"responses_azure_classic.golden", "/openai/responses?api-version=2025-04-01-preview", `{"model":"prod-4o","input":"hello azure"}`},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.golden, ".golden"), func(t *testing.T) {
			_, ts := start(t, Options{Chunks: 4})
			resp, b := do(t, ts, http.MethodPost, c.path, c.body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			stream := strings.Contains(c.body, `"stream":true`)
			want := "application/json"
			if stream {
				want = "text/event-stream; charset=utf-8"
				respEvents(t, b)
			} else if !json.Valid(b) {
				t.Fatalf("not JSON: %s", b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != want {
				t.Errorf("Content-Type %q, want %q", ct, want)
			}
			golden(t, c.golden, maskResponses(b))
		})
	}
}

// The response object's fields come in the order of OpenAI's reference.
func TestResponsesShape(t *testing.T) {
	_, ts := start(t, Options{})
	_, b := do(t, ts, http.MethodPost, "/v1/responses", `{"model":"o3","input":"hi","reasoning":{"summary":"auto"}}`, nil)
	raw := json.RawMessage(b)
	orders := []struct {
		path []string
		want string
	}{
		{nil, "id object created_at status completed_at background error incomplete_details instructions max_output_tokens max_tool_calls model " +
			"output parallel_tool_calls previous_response_id prompt_cache_key reasoning safety_identifier service_tier store temperature text " +
			"tool_choice tools top_logprobs top_p truncation usage user metadata"},
		{[]string{"output", "0"}, "id type summary"},
		{[]string{"usage"}, "input_tokens input_tokens_details output_tokens output_tokens_details total_tokens"},
		{[]string{"reasoning"}, "effort summary"},
		{[]string{"text"}, "format verbosity"},
	}
	for _, o := range orders {
		if got := strings.Join(keysInOrder(t, field(t, raw, o.path...)), " "); got != o.want {
			t.Errorf("keys of %v:\n got %s\nwant %s", o.path, got, o.want)
		}
	}
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Output) != 2 {
		t.Fatalf("output %s (%v)", b, err)
	}
	if got := strings.Join(keysInOrder(t, r.Output[1]), " "); got != "id type status content role" {
		t.Errorf("message keys %s", got)
	}
	if got := strings.Join(keysInOrder(t, field(t, r.Output[1], "content", "0")), " "); got != "type annotations logprobs text" {
		t.Errorf("output_text keys %s", got)
	}
	_, b = do(t, ts, http.MethodPost, "/v1/responses", `{"model":"m","input":"x @mock(tool=f)","tools":[{"type":"function","name":"f"}]}`, nil)
	if got := strings.Join(keysInOrder(t, field(t, json.RawMessage(b), "output", "0")), " "); got != "id type status arguments call_id name" {
		t.Errorf("function_call keys %s", got)
	}
}

// A stream's events come in the documented order, name their items, and
// end with the very response the plain request gets.
func TestResponsesStreamMatchesPlain(t *testing.T) {
	const body = `{"model":"o4-mini","input":"one two three four five","reasoning":{"summary":"auto"}%s}`
	_, ts := start(t, Options{Chunks: 3})
	_, plain := do(t, ts, http.MethodPost, "/v1/responses", fmt.Sprintf(body, ""), nil)
	_, b := do(t, ts, http.MethodPost, "/v1/responses", fmt.Sprintf(body, `,"stream":true`), nil)
	evs := respEvents(t, b)
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if got := respTypes(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	var text strings.Builder
	var msgID string
	for _, e := range evs {
		var d struct {
			ItemID      string          `json:"item_id"`
			OutputIndex *int            `json:"output_index"`
			Delta       string          `json:"delta"`
			Text        *string         `json:"text"`
			Item        json.RawMessage `json:"item"`
			Response    json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(e.data, &d); err != nil {
			t.Fatal(err)
		}
		switch e.typ {
		case "response.created", "response.in_progress":
			var r struct {
				Status string          `json:"status"`
				Output []any           `json:"output"`
				Usage  json.RawMessage `json:"usage"`
			}
			_ = json.Unmarshal(d.Response, &r)
			if r.Status != "in_progress" || r.Output == nil || len(r.Output) != 0 || string(r.Usage) != "null" {
				t.Errorf("%s: %s", e.typ, d.Response)
			}
		case "response.output_item.added":
			if *d.OutputIndex == 1 {
				msgID = string(field(t, d.Item, "id"))
				if !strings.Contains(string(d.Item), `"status":"in_progress","content":[]`) {
					t.Errorf("added %s", d.Item)
				}
			}
		case "response.output_text.delta":
			if `"`+d.ItemID+`"` != msgID || *d.OutputIndex != 1 || !strings.Contains(string(e.data), `"logprobs":[]`) {
				t.Errorf("delta %s names the wrong item (message %s)", e.data, msgID)
			}
			text.WriteString(d.Delta)
		case "response.output_text.done":
			if *d.Text != text.String() {
				t.Errorf("done text %q, deltas %q", *d.Text, text.String())
			}
		case "response.completed":
			if got, want := maskResponses(d.Response), maskResponses(plain); !bytes.Equal(got, want) {
				t.Errorf("completed response\n%s\nplain response\n%s", got, want)
			}
		}
	}
	if !strings.HasSuffix(text.String(), "You said: one two three four five") {
		t.Errorf("deltas %q", text.String())
	}
	if strings.Contains(string(b), "[DONE]") {
		t.Error("the Responses stream has no [DONE]")
	}
}

func TestResponsesInputs(t *testing.T) {
	_, ts := start(t, Options{})
	for _, c := range []struct {
		name, input, want string
	}{
		{"string", `"plain"`, "You said: plain"},
		{"easy message", `[{"role":"user","content":"easy"}]`, "You said: easy"},
		{"the last user message", `[{"role":"user","content":"first"},{"role":"assistant","content":[{"type":"output_text","text":"ok"}]},` +
			`{"role":"system","content":"sys"},{"role":"user","content":[{"type":"input_text","text":"second"},{"type":"input_file","file_id":"file-1"}]}]`,
			"You said: second"},
		{"reasoning item", `[{"type":"reasoning","id":"rs_1","summary":[]},{"role":"user","content":"after"}]`, "You said: after"},
		{"tool loop ends in text", `[{"role":"user","content":"w @mock(tool=f)"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"sunny"}]}]`, "You said: w"},
		{"no input", `null`, "You said nothing."},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := do(t, ts, http.MethodPost, "/v1/responses",
				`{"model":"m","tools":[{"type":"function","name":"f"}],"input":`+c.input+`}`, nil)
			if resp.StatusCode != 200 || !strings.Contains(string(b), c.want+`"}]`) {
				t.Fatalf("%d %s, want a reply ending %q", resp.StatusCode, b, c.want)
			}
		})
	}
}

// Every error is OpenAI's shape and words, kept in one fixture.
func TestResponsesErrors(t *testing.T) {
	_, ts := start(t, Options{})
	const tools = `"tools":[{"type":"function","name":"f"}]`
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
	}{
		{"unknown parameter", "POST", "/v1/responses", `{"model":"m","input":"hi","messages":[]}`, nil, 400},
		{"no model", "POST", "/v1/responses", `{"input":"hi"}`, nil, 400},
		{"not JSON", "POST", "/v1/responses", `{"model":`, nil, 400},
		{"wrong type", "POST", "/v1/responses", `{"model":"m","input":"hi","temperature":"hot"}`, nil, 400},
		{"reasoning of a string", "POST", "/v1/responses", `{"model":"m","input":"hi","reasoning":"high"}`, nil, 400},
		{"include of a string", "POST", "/v1/responses", `{"model":"m","input":"hi","include":"reasoning.encrypted_content"}`, nil, 400},
		{"nested wrong type", "POST", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":5}]}]}`, nil, 400},
		{"input of a number", "POST", "/v1/responses", `{"model":"m","input":7}`, nil, 400},
		{"item without role", "POST", "/v1/responses", `{"model":"m","input":[{"content":"hi"}]}`, nil, 400},
		{"bad role", "POST", "/v1/responses", `{"model":"m","input":[{"role":"tool","content":"hi"}]}`, nil, 400},
		{"no content", "POST", "/v1/responses", `{"model":"m","input":[{"type":"message","role":"user"}]}`, nil, 400},
		{"assistant input_text", "POST", "/v1/responses", `{"model":"m","input":[{"role":"assistant","content":[{"type":"input_text","text":"x"}]}]}`, nil, 400},
		{"image without source", "POST", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, nil, 400},
		{"unknown item", "POST", "/v1/responses", `{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, nil, 400},
		{"call without name", "POST", "/v1/responses", `{"model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, nil, 400},
		{"orphan tool output", "POST", "/v1/responses", `{"model":"m","input":[{"type":"function_call_output","call_id":"call_x","output":"1"}]}`, nil, 400},
		{"previous_response_id", "POST", "/v1/responses", `{"model":"m","input":"hi","previous_response_id":"resp_abc"}`, nil, 400},
		{"conversation", "POST", "/v1/responses", `{"model":"m","input":"hi","conversation":"conv_1"}`, nil, 404},
		{"background", "POST", "/v1/responses", `{"model":"m","input":"hi","background":true}`, nil, 400},
		{"hosted tool", "POST", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, nil, 400},
		{"chat-style tool", "POST", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","function":{"name":"f"}}]}`, nil, 400},
		{"bad tool_choice", "POST", "/v1/responses", `{"model":"m","input":"hi",` + tools + `,"tool_choice":"any"}`, nil, 400},
		{"tool_choice unknown function", "POST", "/v1/responses", `{"model":"m","input":"hi",` + tools + `,"tool_choice":{"type":"function","name":"g"}}`, nil, 400},
		{"required without tools", "POST", "/v1/responses", `{"model":"m","input":"hi","tool_choice":"required"}`, nil, 400},
		{"max_output_tokens too small", "POST", "/v1/responses", `{"model":"m","input":"hi","max_output_tokens":5}`, nil, 400},
		{"unknown include", "POST", "/v1/responses", `{"model":"m","input":"hi","include":["everything"]}`, nil, 400},
		{"stream_options without stream", "POST", "/v1/responses", `{"model":"m","input":"hi","stream_options":{"include_obfuscation":false}}`, nil, 400},
		{"bad format", "POST", "/v1/responses", `{"model":"m","input":"hi","text":{"format":{"type":"xml"}}}`, nil, 400},
		{"json_schema without name", "POST", "/v1/responses", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, nil, 400},
		{"metadata not strings", "POST", "/v1/responses", `{"model":"m","input":"hi","metadata":{"n":1}}`, nil, 400},
		{"mock tool not defined", "POST", "/v1/responses", `{"model":"m","input":"hi @mock(tool=g)",` + tools + `}`, nil, 400},
		{"bad directive", "POST", "/v1/responses", `{"model":"m","input":"hi @mock(chunks=many)"}`, nil, 400},
		{"injected 429 on a stream", "POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true}`,
			map[string]string{"X-Mock-Error-Status": "429", "X-Mock-Retry-After": "2"}, 429},
		{"get", "GET", "/v1/responses/resp_123", "", nil, 404},
		{"delete", "DELETE", "/v1/responses/resp_123", "", nil, 404},
		{"input items", "GET", "/v1/responses/resp_123/input_items", "", nil, 404},
		{"cancel", "POST", "/v1/responses/resp_123/cancel", "", nil, 404},
		{"get the collection", "GET", "/v1/responses", "", nil, 404},
		{"post to an id", "POST", "/v1/responses/resp_123", "", nil, 404},
	}
	var fixture bytes.Buffer
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := do(t, ts, c.method, c.path, c.body, c.hdr)
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			decodeError(t, b)
			fmt.Fprintf(&fixture, "%s %s %s\n%d %s\n\n", c.name+":", c.method, c.path, resp.StatusCode, b)
		})
	}
	golden(t, "responses_errors.golden", fixture.Bytes())
}

// max_output_tokens counts reasoning too: a budget the reasoning uses up
// leaves no message at all.
func TestResponsesReasoningUsesTheBudget(t *testing.T) {
	_, ts := start(t, Options{})
	resp, b := do(t, ts, http.MethodPost, "/v1/responses", `{"model":"gpt-5","input":"hi","max_output_tokens":16}`, nil)
	var r struct {
		Status string `json:"status"`
		Output []struct {
			Type string `json:"type"`
		} `json:"output"`
		Usage struct {
			OutputTokens  int `json:"output_tokens"`
			OutputDetails struct {
				Reasoning int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if r.Status != "incomplete" || len(r.Output) != 1 || r.Output[0].Type != "reasoning" || r.Usage.OutputTokens != 16 || r.Usage.OutputDetails.Reasoning != 16 {
		t.Errorf("response %s", b)
	}
	// effort none turns reasoning off.
	_, b = do(t, ts, http.MethodPost, "/v1/responses", `{"model":"gpt-5","input":"hi","reasoning":{"effort":"none"}}`, nil)
	if strings.Contains(string(b), `"type":"reasoning"`) || !strings.Contains(string(b), `"reasoning_tokens":0`) {
		t.Errorf("effort none: %s", b)
	}
}

func TestResponsesAzure(t *testing.T) {
	_, ts := start(t, Options{APIKey: "az"})
	key := map[string]string{"Api-Key": "az"}
	body := `{"model":"dep-1","input":"hello"}`
	for _, c := range []struct {
		name, path string
		hdr        map[string]string
		status     int
		code       string
	}{
		{"v1", "/openai/v1/responses", key, 200, ""},
		{"v1 preview", "/openai/v1/responses?api-version=preview", key, 200, ""},
		{"classic", "/openai/responses?api-version=2025-03-01-preview", key, 200, ""},
		{"classic without api-version", "/openai/responses", key, 404, "404"},
		{"classic bad api-version", "/openai/responses?api-version=v1", key, 404, "404"},
		{"v1 with a dated version", "/openai/v1/responses?api-version=2025-03-01-preview", key, 400, "BadRequest"},
		{"no key", "/openai/v1/responses", nil, 401, "401"},
		{"bearer is not api-key", "/openai/responses?api-version=2025-03-01-preview", map[string]string{"Authorization": "Bearer az"}, 401, "401"},
		{"not under deployments", "/openai/deployments/dep-1/responses?api-version=2025-03-01-preview", key, 404, "404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := do(t, ts, http.MethodPost, c.path, body, c.hdr)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if c.status == 200 {
				if !strings.Contains(string(b), `"model":"dep-1"`) || !strings.Contains(string(b), "You said: hello") {
					t.Errorf("answer %s", b)
				}
				return
			}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != c.code || e.Error.Message == "" {
				t.Errorf("not Azure's error with code %q: %s", c.code, b)
			}
		})
	}
}

func TestResponsesFailAfter(t *testing.T) {
	s, ts := start(t, Options{Chunks: 4})
	for _, c := range []struct {
		name, body string
		deltas     int
	}{
		{"stream", `{"model":"m","stream":true,"input":"one two three four five @mock(fail_after=2)"}`, 2},
		{"at once", `{"model":"m","stream":true,"input":"one two three four five @mock(fail_after=0)"}`, 0},
		{"past the end", `{"model":"m","stream":true,"input":"one two three four five @mock(fail_after=99)"}`, 4},
		{"function call", `{"model":"m","stream":true,"input":"x @mock(tool=get_weather, fail_after=1)","tools":[` + respWeather + `]}`, 1},
		{"plain", `{"model":"m","input":"one two @mock(fail_after=1)"}`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.Reset()
			resp, err := ts.Client().Do(newRequest(t, context.Background(), http.MethodPost, ts.URL+"/v1/responses", c.body, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read error %v, want an abrupt EOF; got %q", err, b)
			}
			if strings.Contains(string(b), "response.completed") {
				t.Errorf("the stream finished before the cut: %s", b)
			}
			if got := strings.Count(string(b), "event: response.output_text.delta") + strings.Count(string(b), "event: response.function_call_arguments.delta"); got != c.deltas {
				t.Errorf("%d deltas before the cut, want %d:\n%s", got, c.deltas, b)
			}
			if st := s.Stats(); st.Errors != 1 || st.Completed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestResponsesStallAndCancel(t *testing.T) {
	s, ts := start(t, Options{Chunks: 5})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := ts.Client().Do(newRequest(t, ctx, http.MethodPost, ts.URL+"/v1/responses",
		`{"model":"gpt-stall","stream":true,"input":"a b c d e f g @mock(stall_after=1)"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ch, errc := make(chan string, 16), make(chan error, 1)
	go readEvents(resp.Body, ch, errc)
	for i := range 5 { // created, in_progress, item added, part added, one delta
		select {
		case ev := <-ch:
			if i == 4 && !strings.Contains(ev, `"type":"response.output_text.delta"`) {
				t.Errorf("event %d is not a delta: %s", i, ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d events before the stall", i)
		}
	}
	cancel()
	c := waitCancellation(t, s)
	if c.Path != "/v1/responses" || c.Model != "gpt-stall" {
		t.Errorf("cancellation %+v", c)
	}
	if err := <-errc; err == nil {
		t.Error("a stalled stream ended cleanly")
	}
	for ev := range ch {
		t.Errorf("stream went on after stall_after=1: %q", ev)
	}
	if st := s.Stats(); st.Cancelled != 1 || st.Completed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestResponsesHang(t *testing.T) {
	s, ts := start(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.Client().Do(newRequest(t, ctx, http.MethodPost, ts.URL+"/v1/responses",
			`{"model":"gpt-hang","input":"wait","stream":true}`, map[string]string{"X-Mock-Hang": "true"}))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for s.Stats().InFlight != 1 {
		select {
		case err := <-errc:
			t.Fatalf("the request ended instead of hanging: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if c := waitCancellation(t, s); c.Path != "/v1/responses" || c.Model != "gpt-hang" {
		t.Errorf("cancellation %+v", c)
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
}

// Waits are recorded, not waited: TTFT, latency and pacing as for chat.
func TestResponsesTiming(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       time.Duration
	}{
		{"ttft", `{"model":"m","stream":true,"input":"go @mock(ttft=150ms)"}`, 150 * time.Millisecond},
		{"latency", `{"model":"m","input":"go @mock(latency=150ms)"}`, 150 * time.Millisecond},
		// 10 tokens in 8 deltas at 50 tokens/s: the 9 after the first delta take 180ms.
		{"tps", `{"model":"m","stream":true,"input":"go @mock(tps=50)"}`, 180 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ts := start(t, Options{})
			var mu sync.Mutex
			var waited time.Duration
			s.pause = func(ctx context.Context, d time.Duration) bool {
				mu.Lock()
				waited += d
				mu.Unlock()
				return ctx.Err() == nil
			}
			resp, b := do(t, ts, http.MethodPost, "/v1/responses", c.body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			mu.Lock()
			defer mu.Unlock()
			if d := waited - c.want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("waited %v, want %v", waited, c.want)
			}
		})
	}
}

func TestResponsesRecordedAndCounted(t *testing.T) {
	s, ts := start(t, Options{})
	do(t, ts, http.MethodPost, "/v1/responses", `{"model":"m","input":"one"}`, map[string]string{"X-Trace": "t1"})
	do(t, ts, http.MethodPost, "/v1/responses", `{"model":"m","input":"two","stream":true}`, nil)
	do(t, ts, http.MethodPost, "/v1/responses", `{"model":"m","input":"three","bogus":1}`, nil)
	if st := s.Stats(); st.Requests != 3 || st.Completed != 2 || st.Errors != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
	recs := s.Requests()
	if len(recs) != 3 || recs[0].Path != "/v1/responses" || recs[0].Header.Get("X-Trace") != "t1" || string(recs[2].Body) != `{"model":"m","input":"three","bogus":1}` {
		t.Errorf("records %+v", recs)
	}
}

// Responses count in the load model as chat completions do: their input
// and output tokens are in flight from arrival until the answer ends.
func TestResponsesLoad(t *testing.T) {
	s, ts := start(t, Options{Load: LoadModel{PerToken: time.Microsecond, Seed: 3}})
	const body = `{"model":"o4-mini","input":"a prompt of some length to count"%s}`
	resp, b := do(t, ts, http.MethodPost, "/v1/responses", fmt.Sprintf(body, ""), nil)
	var done struct {
		Usage struct {
			Total int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &done); err != nil || resp.StatusCode != 200 || done.Usage.Total == 0 {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	if resp, b := do(t, ts, http.MethodPost, "/v1/responses", fmt.Sprintf(body, `,"stream":true`), nil); resp.StatusCode != 200 ||
		!strings.Contains(string(b), "event: response.completed") {
		t.Fatalf("paced stream: %d %s", resp.StatusCode, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An hour per token: the request is in flight until cancelled.
	req := newRequest(t, ctx, http.MethodPost, ts.URL+"/v1/responses", fmt.Sprintf(body, `,"stream":true`), map[string]string{"X-Mock-Per-Token": "1h"})
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.Client().Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	m := waitMetrics(t, ts, "response in flight", func(m map[string]int64) bool { return m["mockllm_chat_requests_in_flight"] == 1 })
	if got := m["mockllm_tokens_in_flight"]; got != done.Usage.Total {
		t.Errorf("tokens in flight %d, want the response's input and output tokens %d", got, done.Usage.Total)
	}
	cancel()
	<-errc
	waitMetrics(t, ts, "cancelled response released", func(m map[string]int64) bool {
		return m["mockllm_chat_requests_in_flight"] == 0 && m["mockllm_tokens_in_flight"] == 0
	})
	waitCancellation(t, s)
}
