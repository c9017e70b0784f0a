package mockllm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/llm"
)

func ollamaChatJSON(model, user string, stream *bool, extra string) string {
	b := `{"model":` + string(llm.AppendQuote(nil, model)) + `,"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":` +
		string(llm.AppendQuote(nil, user)) + `}]`
	if stream != nil {
		if *stream {
			b += `,"stream":true`
		} else {
			b += `,"stream":false`
		}
	}
	return b + extra + "}"
}

func ptrBool(v bool) *bool { return &v }

// ndjsonLines splits an NDJSON body, failing on anything that is not one
// JSON object per "\n"-terminated line.
func ndjsonLines(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("stream does not end with a newline: %q", s)
	}
	var out []json.RawMessage
	for line := range strings.SplitSeq(strings.TrimSuffix(s, "\n"), "\n") {
		if !json.Valid([]byte(line)) || line[0] != '{' {
			t.Fatalf("malformed line %q", line)
		}
		out = append(out, json.RawMessage(line))
	}
	return out
}

var ollamaDoneKeys = []string{"model", "created_at", "message", "done_reason", "done", "total_duration", "load_duration",
	"prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"}

func TestOllamaChat(t *testing.T) {
	_, ts := start(t, Options{})
	resp, body := do(t, ts, http.MethodPost, "/api/chat", ollamaChatJSON("llama3.2", "Hello there", ptrBool(false), ""), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("%d %v: %s", resp.StatusCode, resp.Header, body)
	}
	raw := json.RawMessage(body)
	if got := keysInOrder(t, raw); !reflect.DeepEqual(got, ollamaDoneKeys) {
		t.Fatalf("keys %v, want %v", got, ollamaDoneKeys)
	}
	if got := keysInOrder(t, field(t, raw, "message")); !reflect.DeepEqual(got, []string{"role", "content"}) {
		t.Fatalf("message keys %v", got)
	}
	var r struct {
		Model     string `json:"model"`
		CreatedAt string `json:"created_at"`
		Message   struct{ Role, Content string }
		Done      bool   `json:"done"`
		Reason    string `json:"done_reason"`
		Prompt    int    `json:"prompt_eval_count"`
		Eval      int    `json:"eval_count"`
	}
	_ = json.Unmarshal(body, &r)
	if _, err := time.Parse(time.RFC3339Nano, r.CreatedAt); err != nil || r.Model != "llama3.2" || !r.Done || r.Reason != "stop" ||
		!strings.Contains(r.Message.Content, "You said: Hello there") || r.Prompt == 0 || r.Eval != len(tokenCuts(r.Message.Content))-1 {
		t.Fatalf("%+v", r)
	}
}

func TestOllamaStreamIsDefault(t *testing.T) {
	_, ts := start(t, Options{Chunks: 3})
	for _, stream := range []*bool{nil, ptrBool(true)} {
		resp, body := do(t, ts, http.MethodPost, "/api/chat", ollamaChatJSON("qwen3:8b", "one two three four five", stream, `,"options":{"num_predict":6}`), nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		lines := ndjsonLines(t, body)
		if len(lines) != 4 {
			t.Fatalf("%d lines, want 3 content lines and a done line", len(lines))
		}
		var text string
		for _, l := range lines[:3] {
			if got := keysInOrder(t, l); !reflect.DeepEqual(got, []string{"model", "created_at", "message", "done"}) {
				t.Fatalf("keys %v", got)
			}
			var part struct{ Message struct{ Content string } }
			_ = json.Unmarshal(l, &part)
			text += part.Message.Content
		}
		if got := keysInOrder(t, lines[3]); !reflect.DeepEqual(got, ollamaDoneKeys) {
			t.Fatalf("done keys %v", got)
		}
		var done struct {
			Reason string `json:"done_reason"`
			Eval   int    `json:"eval_count"`
		}
		_ = json.Unmarshal(lines[3], &done)
		if done.Reason != "length" || done.Eval != 6 || len(tokenCuts(text))-1 != 6 {
			t.Fatalf("num_predict 6: reason %q eval %d text %q", done.Reason, done.Eval, text)
		}
	}
}

func TestOllamaToolCall(t *testing.T) {
	_, ts := start(t, Options{})
	tools := `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",` +
		`"properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"}},"required":["city","days"]}}}]`
	for _, stream := range []bool{false, true} {
		_, body := do(t, ts, http.MethodPost, "/api/chat", ollamaChatJSON("qwen3:8b", "Paris? @mock(tool=get_weather)", ptrBool(stream), tools), nil)
		msg := json.RawMessage(body)
		if stream {
			lines := ndjsonLines(t, body)
			if len(lines) != 2 {
				t.Fatalf("%d lines: %s", len(lines), body)
			}
			msg = lines[0]
		}
		var r struct {
			Message struct {
				Content   string
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Index     int             `json:"index"`
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		}
		if err := json.Unmarshal(msg, &r); err != nil || len(r.Message.ToolCalls) != 1 {
			t.Fatalf("%v %s", err, body)
		}
		tc := r.Message.ToolCalls[0]
		if !strings.HasPrefix(tc.ID, "call_") || len(tc.ID) != 13 || tc.Function.Name != "get_weather" || string(tc.Function.Arguments) != `{"city":"mock","days":1}` {
			t.Fatalf("tool call %+v %s", tc, tc.Function.Arguments)
		}
	}
	resp, body := do(t, ts, http.MethodPost, "/api/chat", ollamaChatJSON("qwen3:8b", "@mock(tool=nope)", ptrBool(false), tools), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "no tool named nope") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestOllamaValidation(t *testing.T) {
	_, ts := start(t, Options{APIKey: "box-key", Models: []string{"llama3.2:latest", "qwen3:8b"}})
	auth := map[string]string{"Authorization": "Bearer box-key"}
	for _, c := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		msg                      string
	}{
		{"no key", "POST", "/api/chat", ollamaChatJSON("qwen3:8b", "x", nil, ""), nil, 401, `{"error":"unauthorized"}`},
		{"missing body", "POST", "/api/chat", "", auth, 400, `{"error":"missing request body"}`},
		{"no model", "POST", "/api/chat", `{"messages":[]}`, auth, 400, `{"error":"model is required"}`},
		{"unknown model", "POST", "/api/chat", ollamaChatJSON("llama9", "x", nil, ""), auth, 404, `{"error":"model \"llama9\" not found, try pulling it first"}`},
		{"tag mismatch", "POST", "/api/chat", ollamaChatJSON("qwen3", "x", nil, ""), auth, 404, `{"error":"model \"qwen3\" not found, try pulling it first"}`},
		{"content array", "POST", "/api/chat", `{"model":"qwen3:8b","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`, auth, 400, "cannot unmarshal array"},
		{"arguments string", "POST", "/api/chat", `{"model":"qwen3:8b","messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}`, auth, 400, "cannot unmarshal string"},
		{"developer role", "POST", "/api/chat", `{"model":"qwen3:8b","messages":[{"role":"developer","content":"x"}]}`, auth, 400, "invalid role"},
		{"image not base64", "POST", "/api/chat", `{"model":"qwen3:8b","messages":[{"role":"user","content":"x","images":["https://x/y.png"]}]}`, auth, 400, "illegal base64"},
		{"format", "POST", "/api/chat", `{"model":"qwen3:8b","messages":[],"format":"yaml"}`, auth, 400, "invalid format"},
		{"think", "POST", "/api/chat", `{"model":"qwen3:8b","messages":[],"think":"max"}`, auth, 400, "invalid think value"},
		{"bad directive", "POST", "/api/chat", ollamaChatJSON("qwen3:8b", "@mock(latency=soon)", nil, ""), auth, 400, "@mock(latency=soon)"},
		{"embed input", "POST", "/api/embed", `{"model":"qwen3:8b","input":[1,2]}`, auth, 400, `{"error":"invalid input type"}`},
		{"embed unknown model", "POST", "/api/embed", `{"model":"x","input":"a"}`, auth, 404, "not found, try pulling it first"},
		{"wrong method", "GET", "/api/chat", "", auth, 405, "405 method not allowed"},
		{"unknown path", "POST", "/api/generate2", "{}", auth, 404, "404 page not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, ts, c.method, c.path, c.body, c.hdr)
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.msg) {
				t.Fatalf("%d %s, want %d containing %s", resp.StatusCode, body, c.status, c.msg)
			}
		})
	}
	resp, body := do(t, ts, "POST", "/api/chat", `{"model":"qwen3:8b","messages":[],"stream":false}`, auth)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"done_reason":"load","done":true`) {
		t.Fatalf("empty messages load the model: %d %s", resp.StatusCode, body)
	}
}

func TestOllamaInjectedErrors(t *testing.T) {
	_, ts := start(t, Options{})
	resp, body := do(t, ts, "POST", "/api/chat", ollamaChatJSON("qwen3:8b", "@mock(error_status=429, retry_after=7)", ptrBool(false), ""), nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || string(body) != `{"error":"too many requests, please try again later"}` {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = do(t, ts, "POST", "/api/embed", `{"model":"nomic-embed-text","input":"x"}`, map[string]string{"X-Mock-Error-Status": "503"})
	if resp.StatusCode != 503 || !strings.Contains(string(body), "server busy") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// fail_after cuts the connection mid-stream.
	req := newRequest(t, context.Background(), "POST", ts.URL+"/api/chat", ollamaChatJSON("qwen3:8b", "a b c d e f @mock(fail_after=2)", nil, ""), nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("read %q err %v, want two lines then a broken connection", b, err)
	}
}

func TestOllamaCancellation(t *testing.T) {
	s, ts := start(t, Options{TokensPerSecond: 2, Chunks: 8})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := newRequest(t, ctx, "POST", ts.URL+"/api/chat", ollamaChatJSON("qwen3:8b", "one two three four five six seven eight nine ten", nil, ""), nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 1)
	if _, err := resp.Body.Read(line); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	c := waitCancellation(t, s)
	if c.Path != "/api/chat" || c.Model != "qwen3:8b" {
		t.Fatalf("%+v", c)
	}
}

func TestOllamaEmbedAndTags(t *testing.T) {
	_, ts := start(t, Options{})
	_, body := do(t, ts, "POST", "/api/embed", `{"model":"nomic-embed-text","input":["why is the sky blue?","hi"],"dimensions":16}`, nil)
	var r struct {
		Model      string      `json:"model"`
		Embeddings [][]float64 `json:"embeddings"`
		Prompt     int         `json:"prompt_eval_count"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Model != "nomic-embed-text" || len(r.Embeddings) != 2 || len(r.Embeddings[0]) != 16 || r.Prompt != 6 {
		t.Fatalf("%v %s", err, body)
	}
	if got := keysInOrder(t, body); !reflect.DeepEqual(got, []string{"model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"}) {
		t.Fatalf("keys %v", got)
	}
	_, again := do(t, ts, "POST", "/api/embed", `{"model":"nomic-embed-text","input":"hi","dimensions":16}`, nil)
	var one struct{ Embeddings [][]float64 }
	_ = json.Unmarshal(again, &one)
	if !reflect.DeepEqual(one.Embeddings[0], r.Embeddings[1]) {
		t.Fatal("equal inputs embed differently")
	}

	resp, body := do(t, ts, "GET", "/api/tags", "", nil)
	var tags struct {
		Models []struct {
			Name, Model, Digest string
			Details             struct{ Family string }
		}
	}
	if err := json.Unmarshal(body, &tags); err != nil || resp.StatusCode != 200 || len(tags.Models) != len(ollamaDefaultModels) {
		t.Fatalf("%v %s", err, body)
	}
	if m := tags.Models[0]; m.Name != "llama3.2:latest" || m.Model != m.Name || len(m.Digest) != 64 || m.Details.Family != "llama" {
		t.Fatalf("%+v", m)
	}
	if got := keysInOrder(t, field(t, body, "models", "0")); !reflect.DeepEqual(got, []string{"name", "model", "modified_at", "size", "digest", "details"}) {
		t.Fatalf("keys %v", got)
	}
}

func TestOllamaDoesNotClaimOpenAIPaths(t *testing.T) {
	_, ts := start(t, Options{})
	resp, body := do(t, ts, "POST", "/v1/chat/completions", chatJSON("gpt-4o-mini", "hi", false, false), nil)
	var e struct{ Error json.RawMessage }
	if resp.StatusCode != 200 || json.Unmarshal(body, &e) != nil || e.Error != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
