package mockllm

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// keysInOrder returns the keys of a JSON object in wire order, because
// clients and golden fixtures see the order, not a map.
func keysInOrder(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func field(t *testing.T, raw json.RawMessage, path ...string) json.RawMessage {
	t.Helper()
	for _, p := range path {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			var a []json.RawMessage
			if err := json.Unmarshal(raw, &a); err != nil || p != "0" || len(a) == 0 {
				t.Fatalf("cannot take %q of %s", p, raw)
			}
			raw = a[0]
			continue
		}
		v, ok := m[p]
		if !ok {
			t.Fatalf("no %q in %s", p, raw)
		}
		raw = v
	}
	return raw
}

func TestChatCompletionShape(t *testing.T) {
	_, ts := start(t, Options{})
	resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("gpt-4o-mini", "Say <hi> & \"bye\" 👋", false, false), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	for _, h := range []string{"X-Request-Id", "Openai-Processing-Ms", "X-Ratelimit-Remaining-Requests"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("header %s missing", h)
		}
	}
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") || len(id) != 36 {
		t.Errorf("x-request-id %q", id)
	}
	raw := json.RawMessage(b)
	orders := []struct {
		path []string
		want []string
	}{
		{nil, []string{"id", "object", "created", "model", "choices", "usage", "service_tier", "system_fingerprint"}},
		{[]string{"choices", "0"}, []string{"index", "message", "logprobs", "finish_reason"}},
		{[]string{"choices", "0", "message"}, []string{"role", "content", "refusal", "annotations"}},
		{[]string{"usage"}, []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"}},
		{[]string{"usage", "prompt_tokens_details"}, []string{"cached_tokens", "audio_tokens"}},
		{[]string{"usage", "completion_tokens_details"}, []string{"reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens"}},
	}
	for _, o := range orders {
		if got := keysInOrder(t, field(t, raw, o.path...)); !reflect.DeepEqual(got, o.want) {
			t.Errorf("keys of %v = %v, want %v", o.path, got, o.want)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "chatcmpl-") || len(id) != 38 {
		t.Errorf("id %q", id)
	}
	content := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
	if want := `Hello from mockllm, the gatehouse test upstream. You said: Say <hi> & "bye" 👋`; content != want {
		t.Errorf("content %q, want %q", content, want)
	}
	golden(t, "chat_completion.golden", b)
}

func TestStreamEvents(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		name := "plain"
		if includeUsage {
			name = "include_usage"
		}
		t.Run(name, func(t *testing.T) {
			_, ts := start(t, Options{Chunks: 4})
			resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("gpt-4o-mini", "one two three", true, includeUsage), nil)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			evs := events(t, b)
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1])
			}
			evs = evs[:len(evs)-1]
			wantN := 1 + 4 + 1 // role, content, finish
			if includeUsage {
				wantN++
			}
			if len(evs) != wantN {
				t.Fatalf("%d chunks, want %d:\n%s", len(evs), wantN, strings.Join(evs, "\n"))
			}
			var id string
			var content strings.Builder
			for i, ev := range evs {
				keys := keysInOrder(t, json.RawMessage(ev))
				want := []string{"id", "object", "created", "model", "service_tier", "system_fingerprint", "choices"}
				if includeUsage {
					want = append(want, "usage")
				}
				if !reflect.DeepEqual(keys, want) {
					t.Errorf("chunk %d keys %v, want %v", i, keys, want)
				}
				var c struct {
					ID      string `json:"id"`
					Object  string `json:"object"`
					Choices []struct {
						Delta        map[string]any `json:"delta"`
						FinishReason *string        `json:"finish_reason"`
					} `json:"choices"`
					Usage json.RawMessage `json:"usage"`
				}
				if err := json.Unmarshal([]byte(ev), &c); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					id = c.ID
				} else if c.ID != id {
					t.Errorf("chunk %d id %q, want the same id as chunk 0 %q", i, c.ID, id)
				}
				if c.Object != "chat.completion.chunk" {
					t.Errorf("object %q", c.Object)
				}
				usageChunk := includeUsage && i == len(evs)-1
				switch {
				case usageChunk:
					if len(c.Choices) != 0 || string(c.Usage) == "null" {
						t.Errorf("usage chunk: %s", ev)
					}
				case includeUsage && string(c.Usage) != "null":
					t.Errorf("chunk %d usage %s, want null", i, c.Usage)
				}
				if usageChunk {
					continue
				}
				ch := c.Choices[0]
				switch {
				case i == 0:
					if !reflect.DeepEqual(ch.Delta, map[string]any{"role": "assistant", "content": "", "refusal": nil}) || ch.FinishReason != nil {
						t.Errorf("first chunk: %s", ev)
					}
				case ch.FinishReason != nil:
					if *ch.FinishReason != "stop" || len(ch.Delta) != 0 || i != 5 {
						t.Errorf("finish chunk %d: %s", i, ev)
					}
				default:
					s, ok := ch.Delta["content"].(string)
					if !ok || s == "" || len(ch.Delta) != 1 {
						t.Errorf("content chunk %d: %s", i, ev)
					}
					content.WriteString(s)
				}
			}
			if want := "Hello from mockllm, the gatehouse test upstream. You said: one two three"; content.String() != want {
				t.Errorf("deltas concatenate to %q, want %q", content.String(), want)
			}
			golden(t, "chat_stream_"+name+".golden", b)
		})
	}
}

// nonStream and stream answer the same request; their content, finish
// reason and usage must agree, or a gateway's accounting tests lie.
func TestUsageStreamMatchesNonStream(t *testing.T) {
	type usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	long := strings.Repeat("lorem ipsum dolor sit amet ", 40)
	tests := []struct {
		name   string
		opts   Options
		extra  string // spliced into the request JSON
		user   string
		finish string
	}{
		{"short", Options{}, "", "hi", "stop"},
		{"one chunk", Options{Chunks: 1}, "", "hello there", "stop"},
		{"many chunks", Options{Chunks: 1000}, "", long, "stop"},
		{"fixed reply", Options{Reply: "  spaced\tout  reply \n"}, "", "x", "stop"},
		{"max_tokens", Options{}, `"max_tokens":5,`, long, "length"},
		{"max_completion_tokens", Options{}, `"max_completion_tokens":3,"max_tokens":9,`, "x", "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, tt.opts)
			plain := strings.Replace(chatJSON("m", tt.user, false, false), "{", "{"+tt.extra, 1)
			_, b := do(t, ts, "POST", "/v1/chat/completions", plain, nil)
			var c struct {
				Choices []struct {
					Message      struct{ Content string } `json:"message"`
					FinishReason string                   `json:"finish_reason"`
				} `json:"choices"`
				Usage usage `json:"usage"`
			}
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatalf("%v: %s", err, b)
			}

			streamed := strings.Replace(chatJSON("m", tt.user, true, true), "{", "{"+tt.extra, 1)
			_, sb := do(t, ts, "POST", "/v1/chat/completions", streamed, nil)
			evs := events(t, sb)
			var content, finish string
			var su usage
			for _, ev := range evs[:len(evs)-1] {
				var ch struct {
					Choices []struct {
						Delta        struct{ Content string } `json:"delta"`
						FinishReason *string                  `json:"finish_reason"`
					} `json:"choices"`
					Usage *usage `json:"usage"`
				}
				if err := json.Unmarshal([]byte(ev), &ch); err != nil {
					t.Fatal(err)
				}
				for _, c := range ch.Choices {
					content += c.Delta.Content
					if c.FinishReason != nil {
						finish = *c.FinishReason
					}
				}
				if ch.Usage != nil {
					su = *ch.Usage
				}
			}
			if content != c.Choices[0].Message.Content {
				t.Errorf("streamed content %q, non-streamed %q", content, c.Choices[0].Message.Content)
			}
			if finish != tt.finish || c.Choices[0].FinishReason != tt.finish {
				t.Errorf("finish_reason streamed %q, non-streamed %q, want %q", finish, c.Choices[0].FinishReason, tt.finish)
			}
			if su != c.Usage || su.PromptTokens < 1 || su.CompletionTokens < 1 || su.TotalTokens != su.PromptTokens+su.CompletionTokens {
				t.Errorf("usage streamed %+v, non-streamed %+v", su, c.Usage)
			}
			if tt.opts.Reply != "" && content != tt.opts.Reply {
				t.Errorf("content %q, want Options.Reply %q", content, tt.opts.Reply)
			}
		})
	}
}

func TestTokenCuts(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"one two  three", []string{"one", " two", "  three"}},
		{"  lead and trail  ", []string{"  lead", " and", " trail  "}},
		{"héllo wörld", []string{"héllo", " wörld"}},
	}
	for _, tt := range tests {
		cuts := tokenCuts(tt.in)
		var got []string
		for i := 0; i+1 < len(cuts); i++ {
			got = append(got, tt.in[cuts[i]:cuts[i+1]])
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("tokenCuts(%q) pieces %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	// system "You are terse." is 14 chars → 4+3; user "hi" → 1+3.
	_, ts := start(t, Options{})
	_, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("m", "hi", false, false), nil)
	if !strings.Contains(string(b), `"prompt_tokens":11,`) {
		t.Errorf("want prompt_tokens 11: %s", b)
	}
	// Content parts count their text only.
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abcdefgh"},{"type":"image_url","image_url":{"url":"http://x"}}]}]}`
	_, b = do(t, ts, "POST", "/v1/chat/completions", body, nil)
	if !strings.Contains(string(b), `"prompt_tokens":5,`) || !strings.Contains(string(b), "You said: abcdefgh") {
		t.Errorf("want prompt_tokens 5 and the text part quoted: %s", b)
	}
}

func TestValidation(t *testing.T) {
	_, ts := start(t, Options{})
	tests := []struct {
		name, body string
		hdr        map[string]string
		param      string // "<null>" for null
		code       string
		msg        string // substring of the message
	}{
		{"malformed", `{"model":"m",`, nil, "<null>", "<null>", "could not parse the JSON body"},
		{"empty body", ``, nil, "<null>", "<null>", "could not parse the JSON body"},
		{"not an object", `[1,2]`, nil, "<null>", "<null>", "could not parse the JSON body"},
		{"missing model", `{"messages":[{"role":"user","content":"hi"}]}`, nil, "<null>", "<null>", "you must provide a model parameter"},
		{"model not a string", `{"model":4,"messages":[{"role":"user","content":"hi"}]}`, nil, "model", "invalid_type", "expected a string, but got a number"},
		{"missing messages", `{"model":"m"}`, nil, "messages", "missing_required_parameter", "Missing required parameter: 'messages'."},
		{"null messages", `{"model":"m","messages":null}`, nil, "messages", "missing_required_parameter", "'messages'"},
		{"empty messages", `{"model":"m","messages":[]}`, nil, "messages", "empty_array", "empty array"},
		{"messages a string", `{"model":"m","messages":"hi"}`, nil, "messages", "invalid_type", "expected an array of objects, but got a string"},
		{"message a string", `{"model":"m","messages":[{"role":"user","content":"a"},"hi"]}`, nil, "messages[1]", "invalid_type", "expected an object, but got a string"},
		{"missing role", `{"model":"m","messages":[{"content":"hi"}]}`, nil, "messages[0].role", "missing_required_parameter", "'messages[0].role'"},
		{"bad role", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"hi"}]}`, nil, "messages[1].role", "invalid_value", "Invalid value: 'robot'"},
		{"role a number", `{"model":"m","messages":[{"role":7,"content":"hi"}]}`, nil, "messages[0].role", "invalid_type", "Invalid type for 'messages[0].role'"},
		{"content a number", `{"model":"m","messages":[{"role":"user","content":7}]}`, nil, "messages[0].content", "invalid_type", "'messages[0].content'"},
		{"stream not a bool", `{"model":"m","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, nil, "stream", "invalid_type", "expected a boolean"},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, nil, "stream_options", "<null>", "only allowed when 'stream' is enabled"},
		{"bad directive", chatJSON("m", "@mock(ttft=soon)", false, false), nil, "messages", "invalid_mock_directive", "ttft=soon"},
		{"unknown directive", chatJSON("m", "@mock(speed=9)", false, false), nil, "messages", "invalid_mock_directive", "unknown key"},
		{"bad header", chatJSON("m", "hi", false, false), map[string]string{"X-Mock-Chunks": "0"}, "<null>", "invalid_mock_header", "X-Mock-Chunks"},
		{"bad status", chatJSON("m", "@mock(error_status=200)", false, false), nil, "messages", "invalid_mock_directive", "not an error status"},
		{"unknown parameter", `{"model":"gpt-4o","top_k":40,"messages":[{"role":"user","content":"hi"}]}`, nil, "<null>", "<null>", "Unrecognized request argument supplied: top_k"},
		{"reasoning_effort on a model that does not reason", `{"model":"gpt-4o-mini","reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`, nil, "<null>", "<null>", "Unrecognized request argument supplied: reasoning_effort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, ts, "POST", "/v1/chat/completions", tt.body, tt.hdr)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
			}
			e := decodeError(t, b)
			if e.Error.Type != "invalid_request_error" || deref(e.Error.Param) != tt.param || deref(e.Error.Code) != tt.code ||
				!strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("got type %q param %q code %q message %q\nwant param %q code %q message containing %q",
					e.Error.Type, deref(e.Error.Param), deref(e.Error.Code), e.Error.Message, tt.param, tt.code, tt.msg)
			}
		})
	}
}

// BenchmarkStream measures the streaming hot path without the network;
// allocations should not grow with the number of chunks.
func BenchmarkStream(b *testing.B) {
	for _, chunks := range []int{8, 64} {
		b.Run(itoa(chunks)+"chunks", func(b *testing.B) {
			s := New(Options{Chunks: chunks, RecordLimit: -1, Reply: strings.Repeat("word ", 64)})
			body := chatJSON("gpt-4o-mini", "hello", true, true)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// TestDocumentedParametersAccepted: every documented parameter, members
// of messages the emulator does not read, and reasoning_effort on a
// reasoning model pass.
func TestDocumentedParametersAccepted(t *testing.T) {
	_, ts := start(t, Options{})
	for _, body := range []string{
		`{"model":"o3-mini","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o","temperature":0.2,"top_p":1,"n":1,"seed":7,"stop":["x"],"user":"u","store":false,"metadata":{"a":"b"},
		  "logprobs":false,"frequency_penalty":0,"presence_penalty":0,"parallel_tool_calls":true,"tool_choice":"auto",
		  "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"response_format":{"type":"text"},
		  "stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false},
		  "messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
		              {"role":"tool","tool_call_id":"c","content":"ok"},{"role":"user","content":"hi","name":"me"}]}`,
	} {
		resp, b := do(t, ts, "POST", "/v1/chat/completions", body, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d: %s\nfor %s", resp.StatusCode, b, body)
		}
	}
}
