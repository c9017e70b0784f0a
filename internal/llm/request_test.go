package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chatView is the part of a ChatRequest a test states, with raw JSON as
// strings so diffs are readable.
type chatView struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	MaxTokens    int
	User         string
	Messages     string
}

func viewOf(r *ChatRequest) chatView {
	return chatView{r.Model, r.Stream, r.IncludeUsage, r.MaxTokens, r.User, string(r.Messages)}
}

const hiMessages = `[{"role":"user","content":"hi"}]`

func TestParseChatRequest(t *testing.T) {
	tests := []struct {
		name string
		body string
		want chatView
	}{
		{
			"minimal",
			`{"model":"gpt-4o","messages":` + hiMessages + `}`,
			chatView{Model: "gpt-4o", Messages: hiMessages},
		},
		{
			"fields in any order with whitespace",
			"\r\n { \"messages\" :\n [ {\"content\":\"hi\" , \"role\":\"user\"} ] ,\t\"model\" : \"m\" } \n",
			chatView{Model: "m", Messages: `[ {"content":"hi" , "role":"user"} ]`},
		},
		{
			"stream with usage",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true}}`,
			chatView{Model: "m", Stream: true, IncludeUsage: true, Messages: hiMessages},
		},
		{
			"stream false",
			`{"model":"m","messages":` + hiMessages + `,"stream":false}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"stream null",
			`{"model":"m","messages":` + hiMessages + `,"stream":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"stream_options null",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":null}`,
			chatView{Model: "m", Stream: true, Messages: hiMessages},
		},
		{
			"include_usage false",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":false}}`,
			chatView{Model: "m", Stream: true, Messages: hiMessages},
		},
		{
			"include_usage null",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":null}}`,
			chatView{Model: "m", Stream: true, Messages: hiMessages},
		},
		{
			"stream_options with other keys",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"x":[1,{"include_usage":false}],"include_usage":true}}`,
			chatView{Model: "m", Stream: true, IncludeUsage: true, Messages: hiMessages},
		},
		{
			"max_tokens",
			`{"model":"m","messages":` + hiMessages + `,"max_tokens":256}`,
			chatView{Model: "m", MaxTokens: 256, Messages: hiMessages},
		},
		{
			"max_completion_tokens",
			`{"model":"m","messages":` + hiMessages + `,"max_completion_tokens":64}`,
			chatView{Model: "m", MaxTokens: 64, Messages: hiMessages},
		},
		{
			"max_completion_tokens wins when last",
			`{"model":"m","messages":` + hiMessages + `,"max_tokens":256,"max_completion_tokens":64}`,
			chatView{Model: "m", MaxTokens: 64, Messages: hiMessages},
		},
		{
			"max_completion_tokens wins when first",
			`{"max_completion_tokens":64,"max_tokens":256,"model":"m","messages":` + hiMessages + `}`,
			chatView{Model: "m", MaxTokens: 64, Messages: hiMessages},
		},
		{
			"max_tokens null",
			`{"model":"m","messages":` + hiMessages + `,"max_tokens":null,"max_completion_tokens":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"max_tokens null beside max_completion_tokens",
			`{"model":"m","messages":` + hiMessages + `,"max_completion_tokens":9,"max_tokens":null}`,
			chatView{Model: "m", MaxTokens: 9, Messages: hiMessages},
		},
		{
			"user",
			`{"model":"m","messages":` + hiMessages + `,"user":"al\u0069ce \"A\""}`,
			chatView{Model: "m", User: `alice "A"`, Messages: hiMessages},
		},
		{
			"user null",
			`{"model":"m","messages":` + hiMessages + `,"user":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"model with escapes",
			`{"model":"gpt\u002d4o\/mini \"x\" \ud83d\ude00","messages":` + hiMessages + `}`,
			chatView{Model: `gpt-4o/mini "x" 😀`, Messages: hiMessages},
		},
		{
			"escaped key names model",
			`{"mod\u0065l":"m","messages":` + hiMessages + `}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"escaped role key",
			`{"model":"m","messages":[{"r\u006fle":"user","content":"hi"}]}`,
			chatView{Model: "m", Messages: `[{"r\u006fle":"user","content":"hi"}]`},
		},
		{
			"optional fields of the right type",
			`{"model":"m","messages":` + hiMessages + `,"temperature":0.2,"top_p":null,"presence_penalty":-1.5,` +
				`"frequency_penalty":0,"n":1,"tools":[{"type":"function"}],"stop":"\n"}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"stop array, tools null",
			`{"model":"m","messages":` + hiMessages + `,"stop":["a","b"],"tools":null,"stop":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"unknown fields of any type",
			`{"model":"m","messages":` + hiMessages + `,"metadata":{"a":[1]},"seed":7,"x":"y","logprobs":true,"Model":5}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"many messages",
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"content":null,"role":"assistant","tool_calls":[]}]}`,
			chatView{Model: "m", Messages: `[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"content":null,"role":"assistant","tool_calls":[]}]`},
		},
		// Duplicate keys: the last one decides, as it does for encoding/json
		// and for the upstream that receives the same bytes.
		{
			"duplicate model",
			`{"model":"a","messages":` + hiMessages + `,"model":"b"}`,
			chatView{Model: "b", Messages: hiMessages},
		},
		{
			"duplicate max_tokens",
			`{"model":"m","messages":` + hiMessages + `,"max_tokens":5,"max_tokens":100000}`,
			chatView{Model: "m", MaxTokens: 100000, Messages: hiMessages},
		},
		{
			"max_tokens then null",
			`{"model":"m","messages":` + hiMessages + `,"max_tokens":5,"max_tokens":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"max_completion_tokens then null leaves max_tokens",
			`{"model":"m","messages":` + hiMessages + `,"max_completion_tokens":5,"max_tokens":7,"max_completion_tokens":null}`,
			chatView{Model: "m", MaxTokens: 7, Messages: hiMessages},
		},
		{
			"stream then null",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
		{
			"stream_options then one without usage",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true},"stream_options":{}}`,
			chatView{Model: "m", Stream: true, Messages: hiMessages},
		},
		{
			"stream_options then null",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true},"stream_options":null}`,
			chatView{Model: "m", Stream: true, Messages: hiMessages},
		},
		{
			"include_usage then null",
			`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true,"include_usage":null}}`,
			chatView{Model: "m", Stream: true, Messages: hiMessages},
		},
		{
			"user then null",
			`{"model":"m","messages":` + hiMessages + `,"user":"alice","user":null}`,
			chatView{Model: "m", Messages: hiMessages},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			r, err := ParseChatRequest(body)
			if err != nil {
				t.Fatalf("ParseChatRequest(%s) = %v", tt.body, err)
			}
			if diff := cmp.Diff(tt.want, viewOf(r)); diff != "" {
				t.Errorf("ParseChatRequest(%s) (-want +got):\n%s", tt.body, diff)
			}
			if diff := cmp.Diff(stdChatView(t, body), viewOf(r)); diff != "" {
				t.Errorf("ParseChatRequest(%s) disagrees with encoding/json (-json +got):\n%s", tt.body, diff)
			}
			if &r.Body[0] != &body[0] || len(r.Body) != len(body) {
				t.Errorf("Body is not the caller's slice")
			}
		})
	}
}

func TestParseChatRequestErrors(t *testing.T) {
	const msgs = `"messages":` + hiMessages
	tests := []struct {
		name  string
		body  string
		param string // "" for errors about the body as a whole
		code  string
		msg   string // a substring of the message
	}{
		{"malformed JSON", `{"model":"m",` + msgs, "", "invalid_json", "could not parse the JSON body"},
		{"trailing comma", `{"model":"m",` + msgs + `,}`, "", "invalid_json", "could not parse the JSON body"},
		{"trailing data", `{"model":"m",` + msgs + `}{}`, "", "invalid_json", "could not parse the JSON body"},
		{"single quotes", `{'model':'m'}`, "", "invalid_json", "could not parse the JSON body"},
		{"bad JSON after the fields", `{"model":"m",` + msgs + `,"x":[1,2,}`, "", "invalid_json", "could not parse the JSON body"},
		{"empty body", ``, "", "invalid_json", "could not parse the JSON body"},
		{"blank body", " \r\n\t", "", "invalid_json", "could not parse the JSON body"},
		{"array body", `[{"model":"m"}]`, "", "invalid_json", "must be a JSON object"},
		{"string body", `"hello"`, "", "invalid_json", "must be a JSON object"},
		{"null body", `null`, "", "invalid_json", "must be a JSON object"},
		{"empty object", `{}`, "model", "missing_required_parameter", "Missing required parameter: 'model'"},
		{"missing model", `{` + msgs + `}`, "model", "missing_required_parameter", "Missing required parameter: 'model'"},
		{"missing messages", `{"model":"m"}`, "messages", "missing_required_parameter", "Missing required parameter: 'messages'"},
		{"model number", `{"model":4,` + msgs + `}`, "model", "invalid_type", "Invalid type for 'model': expected a string, but got a number"},
		{"model null", `{"model":null,` + msgs + `}`, "model", "invalid_type", "'model': expected a string, but got null"},
		{"model array", `{"model":["m"],` + msgs + `}`, "model", "invalid_type", "'model': expected a string, but got an array"},
		{"model empty", `{"model":"",` + msgs + `}`, "model", "invalid_value", "'model'"},
		{"messages object", `{"model":"m","messages":{"role":"user"}}`, "messages", "invalid_type", "'messages': expected an array, but got an object"},
		{"messages string", `{"model":"m","messages":"hi"}`, "messages", "invalid_type", "'messages': expected an array, but got a string"},
		{"messages null", `{"model":"m","messages":null}`, "messages", "invalid_type", "'messages': expected an array, but got null"},
		{"stream string", `{"model":"m",` + msgs + `,"stream":"true"}`, "stream", "invalid_type", "'stream': expected a boolean, but got a string"},
		{"stream number", `{"model":"m",` + msgs + `,"stream":1}`, "stream", "invalid_type", "'stream': expected a boolean, but got a number"},
		{"stream_options string", `{"model":"m",` + msgs + `,"stream_options":"x"}`, "stream_options", "invalid_type", "'stream_options': expected an object, but got a string"},
		{"stream_options array", `{"model":"m",` + msgs + `,"stream_options":[]}`, "stream_options", "invalid_type", "'stream_options': expected an object, but got an array"},
		{"stream_options bool", `{"model":"m",` + msgs + `,"stream_options":true}`, "stream_options", "invalid_type", "'stream_options': expected an object, but got a boolean"},
		{"include_usage string", `{"model":"m",` + msgs + `,"stream_options":{"include_usage":"true"}}`, "stream_options.include_usage", "invalid_type", "'stream_options.include_usage': expected a boolean, but got a string"},
		{"include_usage number", `{"model":"m",` + msgs + `,"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "invalid_type", "'stream_options.include_usage': expected a boolean"},
		{"max_tokens float", `{"model":"m",` + msgs + `,"max_tokens":1.5}`, "max_tokens", "invalid_type", "'max_tokens': expected an integer, but got a number"},
		{"max_tokens exponent", `{"model":"m",` + msgs + `,"max_tokens":1e3}`, "max_tokens", "invalid_type", "'max_tokens': expected an integer"},
		{"max_tokens string", `{"model":"m",` + msgs + `,"max_tokens":"10"}`, "max_tokens", "invalid_type", "'max_tokens': expected an integer, but got a string"},
		{"max_tokens overflow", `{"model":"m",` + msgs + `,"max_tokens":99999999999999999999}`, "max_tokens", "invalid_type", "'max_tokens'"},
		{"max_tokens negative", `{"model":"m",` + msgs + `,"max_tokens":-5}`, "max_tokens", "invalid_value", "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got -5 instead."},
		{"max_tokens zero", `{"model":"m",` + msgs + `,"max_tokens":0}`, "max_tokens", "invalid_value", "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead."},
		{"max_completion_tokens zero", `{"model":"m",` + msgs + `,"max_completion_tokens":0}`, "max_completion_tokens", "invalid_value", "'max_completion_tokens'"},
		{"max_completion_tokens bool", `{"model":"m",` + msgs + `,"max_completion_tokens":true}`, "max_completion_tokens", "invalid_type", "'max_completion_tokens': expected an integer, but got a boolean"},
		{"user number", `{"model":"m",` + msgs + `,"user":42}`, "user", "invalid_type", "'user': expected a string, but got a number"},
		{"temperature string", `{"model":"m",` + msgs + `,"temperature":"0.5"}`, "temperature", "invalid_type", "'temperature': expected a number, but got a string"},
		{"top_p bool", `{"model":"m",` + msgs + `,"top_p":true}`, "top_p", "invalid_type", "'top_p': expected a number"},
		{"presence_penalty array", `{"model":"m",` + msgs + `,"presence_penalty":[]}`, "presence_penalty", "invalid_type", "'presence_penalty'"},
		{"frequency_penalty object", `{"model":"m",` + msgs + `,"frequency_penalty":{}}`, "frequency_penalty", "invalid_type", "'frequency_penalty'"},
		{"n string", `{"model":"m",` + msgs + `,"n":"2"}`, "n", "invalid_type", "'n': expected an integer, but got a string"},
		{"tools object", `{"model":"m",` + msgs + `,"tools":{}}`, "tools", "invalid_type", "'tools': expected an array, but got an object"},
		{"stop number", `{"model":"m",` + msgs + `,"stop":1}`, "stop", "invalid_type", "'stop': expected a string or an array, but got a number"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages", "empty_array", "Invalid 'messages': empty array"},
		{"empty messages with space", `{"model":"m","messages":[ ]}`, "messages", "empty_array", "'messages'"},
		{"message string", `{"model":"m","messages":["hi"]}`, "messages[0]", "invalid_type", "'messages[0]': expected an object, but got a string"},
		{"second message array", `{"model":"m","messages":[{"role":"user","content":"hi"},[]]}`, "messages[1]", "invalid_type", "'messages[1]': expected an object, but got an array"},
		{"message null", `{"model":"m","messages":[null]}`, "messages[0]", "invalid_type", "'messages[0]': expected an object, but got null"},
		{"user content missing", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "missing_required_parameter", "'messages[0].content'"},
		{"system content null", `{"model":"m","messages":[{"role":"system","content":null},{"role":"user","content":"hi"}]}`, "messages[0].content", "invalid_type", "but got null"},
		{"tool content missing", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c1"}]}`, "messages[0].content", "missing_required_parameter", "'messages[0].content'"},
		{"assistant text missing, no tool calls", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":null}]}`, "messages[1].content", "invalid_type", "but got null"},
		{"user with tool calls still needs content", `{"model":"m","messages":[{"role":"user","tool_calls":[{"id":"c1"}]}]}`, "messages[0].content", "missing_required_parameter", "'messages[0].content'"},
		{"message without role", `{"model":"m","messages":[{"role":"user","content":"hi"},{"content":"hi"}]}`, "messages[1].role", "missing_required_parameter", "Missing required parameter: 'messages[1].role'"},
		{"empty message", `{"model":"m","messages":[{}]}`, "messages[0].role", "missing_required_parameter", "'messages[0].role'"},
		{"role number", `{"model":"m","messages":[{"role":1}]}`, "messages[0].role", "invalid_type", "'messages[0].role': expected a string, but got a number"},
		{"role null", `{"model":"m","messages":[{"content":"x","role":null}]}`, "messages[0].role", "invalid_type", "'messages[0].role': expected a string, but got null"},
		{"content a number", `{"model":"m","messages":[{"role":"user","content":12}]}`, "messages[0].content", "invalid_type", "'messages[0].content': expected a string or an array, but got a number"},
		{"content an object", `{"model":"m","messages":[{"content":{"text":"hi"},"role":"user"}]}`, "messages[0].content", "invalid_type", "'messages[0].content': expected a string or an array, but got an object"},
		{"content part a string", `{"model":"m","messages":[{"role":"user","content":"ok"},{"role":"user","content":[{"type":"text","text":"a"},"b"]}]}`, "messages[1].content[1]", "invalid_type", "'messages[1].content[1]': expected a content part object, but got a string"},
		{"escaped content key a number", `{"model":"m","messages":[{"role":"user","c\u006fntent":12}]}`, "messages[0].content", "invalid_type", "'messages[0].content': expected a string or an array, but got a number"},
		{"escaped role key null", `{"model":"m","messages":[{"r\u006fle":null , "name" : "x"}]}`, "messages[0].role", "invalid_type", "'messages[0].role': expected a string, but got null"},
		{"later role wins", `{"model":"m","messages":[{"role":"user","role":7}]}`, "messages[0].role", "invalid_type", "'messages[0].role': expected a string, but got a number"},
		{"message 12 without role", `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 12) + `{"Role":"user"}]}`, "messages[12].role", "missing_required_parameter", "'messages[12].role'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseChatRequest([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseChatRequest(%s) = %+v, want an error", tt.body, viewOf(r))
			}
			if r != nil {
				t.Errorf("ParseChatRequest returned a request with its error")
			}
			checkBadRequest(t, err, tt.param, tt.code, tt.msg)
		})
	}
}

// checkBadRequest asserts err is the OpenAI-style 400 a client can act on.
func checkBadRequest(t *testing.T, err error, param, code, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *Error", err, err)
	}
	got := struct {
		Kind   ErrorKind
		Status int
		Type   string
		Param  string
		Code   string
	}{e.Kind, e.Status, e.Type, e.Param, e.Code}
	want := got
	want.Kind, want.Status, want.Type, want.Param, want.Code = KindBadRequest, http.StatusBadRequest, "invalid_request_error", param, code
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error %q (-want +got):\n%s", e.Message, diff)
	}
	if !strings.Contains(e.Message, msg) {
		t.Errorf("message %q does not contain %q", e.Message, msg)
	}
	if param != "" && !strings.Contains(e.Message, "'"+param+"'") {
		t.Errorf("message %q does not name %q", e.Message, param)
	}
	if e.Cause != nil {
		t.Errorf("a client error carries an internal cause: %v", e.Cause)
	}
}

// stdChatView reads the gateway's fields with encoding/json, which keeps
// the last of duplicate keys as the upstream's decoder will.
func stdChatView(t *testing.T, body []byte) chatView {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", body, err)
	}
	var v chatView
	if err := json.Unmarshal(m["model"], &v.Model); err != nil {
		t.Fatalf("model: %v", err)
	}
	v.Stream = string(m["stream"]) == "true"
	if so := m["stream_options"]; so != nil {
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(so, &opts); err != nil {
			t.Fatalf("stream_options: %v", err)
		}
		v.IncludeUsage = string(opts["include_usage"]) == "true"
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if raw := m[k]; raw != nil && string(raw) != "null" {
			n, err := strconv.Atoi(string(raw))
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			v.MaxTokens = n
		}
	}
	if raw := m["user"]; raw != nil && string(raw) != "null" {
		if err := json.Unmarshal(raw, &v.User); err != nil {
			t.Fatalf("user: %v", err)
		}
	}
	v.Messages = string(m["messages"])
	return v
}

func TestChatUpstreamBodyUnchanged(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		model string
		force bool
	}{
		{"same model", `{"model":"m","messages":` + hiMessages + `}`, "m", false},
		{"same model, force on a non-stream", `{"model":"m","messages":` + hiMessages + `}`, "m", true},
		{"same model, stream false", `{"model":"m","messages":` + hiMessages + `,"stream":false}`, "m", true},
		{"stream already with usage", `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true}}`, "m", true},
		{"stream, usage not forced", `{"model":"m","messages":` + hiMessages + `,"stream":true}`, "m", false},
		{"escaped model equal after unquoting", `{"model":"\u006d","messages":` + hiMessages + `}`, "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			r, err := ParseChatRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			got := r.UpstreamBody(tt.model, tt.force)
			if len(got) != len(body) || &got[0] != &body[0] {
				t.Errorf("UpstreamBody copied an unchanged body: got %s", got)
			}
		})
	}
}

// TestChatUpstreamBodyAllocations: a rewritten model costs the new body
// and nothing else (its JSON form is quoted on the stack).
func TestChatUpstreamBodyAllocations(t *testing.T) {
	r, err := ParseChatRequest([]byte(`{"model":"alias","messages":` + hiMessages + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.UpstreamBody("gpt-4o-mini-2024-07-18", false) }); n != 1 {
		t.Errorf("%v allocations a rewrite, want 1", n)
	}
}

func TestChatUpstreamBody(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		model     string
		force     bool
		wantUsage bool   // include_usage must be injected
		want      string // exact output, when worth pinning
	}{
		{
			name:  "model replaced",
			body:  `{"model":"alias","messages":` + hiMessages + `}`,
			model: "gpt-4o-2024-08-06",
			want:  `{"model":"gpt-4o-2024-08-06","messages":` + hiMessages + `}`,
		},
		{
			name:  "model needing escapes",
			body:  `{"model":"alias","messages":` + hiMessages + `}`,
			model: "a\"b\\c\n\t\x01</script>é😀",
			want:  `{"model":"a\"b\\c\n\t\u0001</script>é😀","messages":` + hiMessages + `}`,
		},
		{
			name:  "model with invalid UTF-8",
			body:  `{"model":"alias","messages":` + hiMessages + `}`,
			model: "bad\xffname",
			want:  `{"model":"bad\ufffdname","messages":` + hiMessages + `}`,
		},
		{
			name:  "escaped model replaced whole",
			body:  `{ "messages":` + hiMessages + `, "mod\u0065l" : "\u0061lias" }`,
			model: "real",
			want:  `{ "messages":` + hiMessages + `, "mod\u0065l" : "real" }`,
		},
		{
			name:  "model longer than the stack buffer it is quoted in",
			body:  `{"model":"alias","messages":` + hiMessages + `}`,
			model: strings.Repeat("long-model-name/", 6) + "\"end\"",
			want:  `{"model":"` + strings.Repeat("long-model-name/", 6) + `\"end\"","messages":` + hiMessages + `}`,
		},
		{
			name:  "model shorter and longer",
			body:  `{"model":"a-very-long-alias-name","messages":` + hiMessages + `,"model":"x"}`,
			model: "a-much-much-longer-deployment-model",
			want:  `{"model":"a-very-long-alias-name","messages":` + hiMessages + `,"model":"a-much-much-longer-deployment-model"}`,
		},
		{
			name:      "usage injected when stream_options is absent",
			body:      `{"model":"m","messages":` + hiMessages + `,"stream":true}`,
			model:     "m",
			force:     true,
			wantUsage: true,
			want:      `{"stream_options":{"include_usage":true},"model":"m","messages":` + hiMessages + `,"stream":true}`,
		},
		{
			name:      "usage injected with leading space",
			body:      " \n{ \"model\":\"m\",\"messages\":" + hiMessages + ",\"stream\":true}",
			model:     "m",
			force:     true,
			wantUsage: true,
			want:      " \n{\"stream_options\":{\"include_usage\":true}, \"model\":\"m\",\"messages\":" + hiMessages + ",\"stream\":true}",
		},
		{
			name:      "usage injected when stream_options is null",
			body:      `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":null}`,
			model:     "m",
			force:     true,
			wantUsage: true,
			want:      `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name:      "usage injected beside other stream options",
			body:      `{"model":"m","stream_options":{"b":[1, 2],"a":{"x":"<y>"}},"messages":` + hiMessages + `,"stream":true}`,
			model:     "m",
			force:     true,
			wantUsage: true,
		},
		{
			name:      "include_usage false turned on",
			body:      `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true}}`,
			model:     "m",
			force:     true,
			wantUsage: true,
		},
		{
			name:      "include_usage null turned on",
			body:      `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":null}}`,
			model:     "m",
			force:     true,
			wantUsage: true,
		},
		{
			name:      "both, stream_options absent",
			body:      `{"model":"alias","messages":` + hiMessages + `,"stream":true}`,
			model:     "real\"model",
			force:     true,
			wantUsage: true,
			want:      `{"stream_options":{"include_usage":true},"model":"real\"model","messages":` + hiMessages + `,"stream":true}`,
		},
		{
			name:      "both, model before stream_options",
			body:      `{"model":"alias","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":false}}`,
			model:     "real",
			force:     true,
			wantUsage: true,
			want:      `{"model":"real","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name:      "both, stream_options before model",
			body:      `{"stream_options":{"include_usage":false},"stream":true,"messages":` + hiMessages + `,"model":"alias"}`,
			model:     "a-longer-real-name",
			force:     true,
			wantUsage: true,
			want:      `{"stream_options":{"include_usage":true},"stream":true,"messages":` + hiMessages + `,"model":"a-longer-real-name"}`,
		},
		{
			name:      "both, stream_options null before model",
			body:      `{"stream_options":null,"stream":true,"model":"alias","messages":` + hiMessages + `}`,
			model:     "r",
			force:     true,
			wantUsage: true,
			want:      `{"stream_options":{"include_usage":true},"stream":true,"model":"r","messages":` + hiMessages + `}`,
		},
		{
			name:  "model only: not a stream",
			body:  `{"model":"alias","messages":` + hiMessages + `,"stream_options":{"include_usage":false}}`,
			model: "real",
			force: true,
			want:  `{"model":"real","messages":` + hiMessages + `,"stream_options":{"include_usage":false}}`,
		},
		{
			name:      "usage on the duplicate stream_options that counts",
			body:      `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true},"stream_options":{}}`,
			model:     "m",
			force:     true,
			wantUsage: true,
			want:      `{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			orig := bytes.Clone(body)
			r, err := ParseChatRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			got := r.UpstreamBody(tt.model, tt.force)
			if !bytes.Equal(body, orig) {
				t.Errorf("UpstreamBody modified the client's body: %s", body)
			}
			if len(got) > 0 && len(body) > 0 && &got[0] == &body[0] {
				t.Errorf("UpstreamBody returned the client's body for a change")
			}
			if tt.want != "" && string(got) != tt.want {
				t.Errorf("UpstreamBody =\n%s\nwant\n%s", got, tt.want)
			}
			checkEdited(t, orig, got, tt.model, tt.wantUsage)
		})
	}
}

// checkEdited asserts that out is valid JSON that decodes to the same
// object as orig, except the model is model and, when usage is set,
// stream_options.include_usage is true with the other options kept.
func checkEdited(t *testing.T, orig, out []byte, model string, usage bool) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("UpstreamBody produced invalid JSON: %q", out)
	}
	want := decodeObject(t, orig)
	want["model"] = decodeString(t, model)
	if usage {
		opts, _ := want["stream_options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["include_usage"] = true
		want["stream_options"] = opts
	}
	if diff := cmp.Diff(want, decodeObject(t, out)); diff != "" {
		t.Errorf("UpstreamBody(%q) = %q; decoded (-want +got):\n%s", orig, out, diff)
	}
}

func decodeObject(t *testing.T, data []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return m
}

// decodeString is s as a JSON decoder reads it back: invalid UTF-8 becomes
// U+FFFD, byte by byte.
func decodeString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzParseChatRequest checks the gateway's reading of a body against
// encoding/json's, and that UpstreamBody's splices keep the JSON intact.
func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":` + hiMessages + `}`,
		`{"model":"m","messages":` + hiMessages + `,"stream":true}`,
		`{"stream_options":{"include_usage":false,"x":1},"stream":true,"messages":` + hiMessages + `,"model":"alias"}`,
		`{"model":"m","messages":` + hiMessages + `,"stream":true,"stream_options":null,"max_tokens":5,"max_completion_tokens":3}`,
		`{"model":"m","messages":` + hiMessages + `,"max_tokens":5,"max_tokens":null,"stream":true,"stream":null}`,
		`{"mod\u0065l":"\u0061","messages":[{"r\u006fle":"user"}],"user":"u","user":null}`,
		`{"model":"m","messages":[{}]}`,
	} {
		f.Add([]byte(s), "gpt-4o", true)
		f.Add([]byte(s), "m", false)
	}
	f.Fuzz(func(t *testing.T, body []byte, model string, force bool) {
		orig := bytes.Clone(body)
		r, err := ParseChatRequest(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Fatalf("ParseChatRequest error %v is not a 400 *Error", err)
			}
			if e.Code == "invalid_json" && json.Valid(body) && bytes.TrimLeft(body, " \t\r\n")[0] == '{' && nesting(body) <= maxDepth {
				t.Fatalf("ParseChatRequest(%q) = %v for a well-formed JSON object", body, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("ParseChatRequest accepted invalid JSON %q", body)
		}
		if diff := cmp.Diff(stdChatView(t, body), viewOf(r)); diff != "" {
			t.Fatalf("ParseChatRequest(%q) disagrees with encoding/json (-json +got):\n%s", body, diff)
		}
		out := r.UpstreamBody(model, force)
		if !bytes.Equal(body, orig) {
			t.Fatalf("UpstreamBody modified the client's body")
		}
		usage := force && r.Stream && !r.IncludeUsage
		if model == r.Model && !usage && &out[0] != &body[0] {
			t.Fatalf("UpstreamBody copied an unchanged body")
		}
		checkEdited(t, body, out, model, usage)
	})
}
