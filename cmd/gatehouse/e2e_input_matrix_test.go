package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/mockllm"
)

// The client-input matrix: every kind of broken or hostile body, sent to
// every API route, end to end. Each is answered with the right status in
// the route's dialect, a refused one reaches no upstream, and the gateway
// is healthy after.

// matrixLimit is the gateway's server.max_body_bytes in the matrix.
const matrixLimit = 1 << 20

// apiRoute is one API route and a valid body for it, with the placeholder
// X where a message's content (or the input) goes and M for the model.
type apiRoute struct {
	name, path, body, model string
	anthropic               bool
}

var matrixRoutes = []apiRoute{
	{"chat", "/v1/chat/completions", `{"model":M,"messages":[{"role":"user","content":X}]}`, `"chat"`, false},
	{"messages", "/v1/messages", `{"model":M,"max_tokens":16,"messages":[{"role":"user","content":X}]}`, `"chat"`, true},
	{"responses", "/v1/responses", `{"model":M,"input":X}`, `"chat"`, false},
	{"embeddings", "/v1/embeddings", `{"model":M,"input":X}`, `"embed"`, false},
}

func (r apiRoute) with(content string) string { return r.withModel(r.model, content) }

func (r apiRoute) withModel(model, content string) string {
	return strings.Replace(strings.Replace(r.body, "M", model, 1), "X", content, 1)
}

// quoted is a JSON string of n bytes of text in all.
func quoted(n int) string { return `"` + strings.Repeat("a", n-2) + `"` }

// stringArray is a JSON array of short strings, about n bytes in all.
func stringArray(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`"ab",`, n/5), ",") + "]"
}

func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

func TestClientInputMatrix(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "server: {max_body_bytes: 1MiB}\n"))
	cases := []struct {
		name   string
		body   func(r apiRoute) string
		ctype  string
		status func(r apiRoute) int // the expected status; a 200 goes upstream
	}{
		{"empty body", func(apiRoute) string { return "" }, "", always(400)},
		{"malformed", func(apiRoute) string { return `{"model":"chat",` }, "", always(400)},
		{"truncated", func(r apiRoute) string { b := r.with(`"hello there"`); return b[:len(b)/2] }, "", always(400)},
		{"trailing garbage", func(r apiRoute) string { return r.with(`"hi"`) + "}" }, "", always(400)},
		{"two documents", func(r apiRoute) string { return r.with(`"hi"`) + r.with(`"hi"`) }, "", always(400)},
		{"array at the top", func(r apiRoute) string { return "[" + r.with(`"hi"`) + "]" }, "", always(400)},
		{"null at the top", func(apiRoute) string { return "null" }, "", always(400)},
		{"model a number", func(r apiRoute) string { return r.withModel("5", `"hi"`) }, "", always(400)},
		{"model an array", func(r apiRoute) string { return r.withModel(`["chat"]`, `"hi"`) }, "", always(400)},
		{"content an object", func(r apiRoute) string { return r.with(`{"text":"hi"}`) }, "", always(400)},
		{"content a number", func(r apiRoute) string { return r.with(`12`) }, "", always(400)},
		// Only an assistant's turn of tool calls may go without content
		// (OpenAI's reference); a user's may not, in either dialect.
		{"content null", func(r apiRoute) string { return r.with(`null`) }, "", always(400)},
		{"content missing", func(r apiRoute) string {
			b := strings.Replace(strings.Replace(r.body, `,"content":X`, "", 1), `,"input":X`, "", 1)
			return strings.Replace(b, "M", r.model, 1)
		}, "", always(400)},
		{"invalid utf-8 in content", func(r apiRoute) string { return r.with("\"h\xffi\xfe\"") }, "", always(400)},
		{"invalid utf-8 in the model", func(r apiRoute) string { return r.withModel("\"ch\xc3at\"", `"hi"`) }, "", always(400)},
		{"bad escape", func(r apiRoute) string { return r.with(`"\x41"`) }, "", always(400)},
		{"lone surrogate escape", func(r apiRoute) string { return r.with(`"\ud800"`) }, "", always(200)},
		{"control character in a string", func(r apiRoute) string { return r.with("\"a\x01b\"") }, "", always(400)},
		{"huge number", func(r apiRoute) string {
			field := map[string]string{"chat": "max_tokens", "messages": "max_tokens", "responses": "max_output_tokens", "embeddings": "dimensions"}[r.name]
			return strings.Replace(r.with(`"hi"`), "{", `{"`+field+`":1e400,`, 1)
		}, "", always(400)},
		{"deep nesting", func(r apiRoute) string { return r.with(nested(100000)) }, "", always(400)},
		{"deep nesting of objects", func(r apiRoute) string {
			return r.with(strings.Repeat(`{"a":`, 50000) + "1" + strings.Repeat("}", 50000))
		}, "", always(400)},
		{"deep nesting in an unknown field", func(r apiRoute) string {
			return strings.Replace(r.with(`"hi"`), "{", `{"x_extra":`+nested(100000)+",", 1)
		}, "", always(400)},
		{"huge string just under the limit", func(r apiRoute) string { return r.with(quoted(matrixLimit - 200)) }, "", always(200)},
		{"huge string over the limit", func(r apiRoute) string { return r.with(quoted(matrixLimit + 10)) }, "", always(413)},
		{"huge array over the limit", func(r apiRoute) string { return r.with(stringArray(matrixLimit + 10)) }, "", always(413)},
		{"huge array just under the limit", func(r apiRoute) string { return r.with(stringArray(matrixLimit - 200)) }, "", func(r apiRoute) int {
			switch r.name {
			case "chat", "messages", "responses":
				return 400 // content is a list of parts, not strings
			}
			return 400 // over 2048 inputs in one embeddings request
		}},
		{"text/plain", func(r apiRoute) string { return r.with(`"hi"`) }, "text/plain", always(415)},
	}
	for _, r := range matrixRoutes {
		for _, tt := range cases {
			t.Run(r.name+"/"+tt.name, func(t *testing.T) {
				want := tt.status(r)
				before := up.mock.Stats().Requests
				req, err := http.NewRequest(http.MethodPost, gw.URL+r.path, strings.NewReader(tt.body(r)))
				if err != nil {
					t.Fatal(err)
				}
				ctype := "application/json"
				if tt.ctype != "" {
					ctype = tt.ctype
				}
				req.Header.Set("Content-Type", ctype)
				req.Header.Set("Authorization", "Bearer "+clientKey)
				req.Header.Set("Anthropic-Version", "2023-06-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("got %d, want %d: %s", resp.StatusCode, want, b)
				}
				upstream := up.mock.Stats().Requests - before
				if want != 200 {
					dialectError(t, r.anthropic, string(b))
					if upstream != 0 {
						t.Errorf("%d requests went upstream", upstream)
					}
				} else if upstream == 0 {
					t.Error("nothing went upstream")
				}
			})
		}
	}
	// Headers over server.max_header_bytes (32 KiB) by more than
	// net/http's 4 KiB of slack: answered in dialect too, by the
	// connection watcher, before net/http would answer in plain text.
	for _, r := range matrixRoutes {
		for _, size := range []int{64 << 10, 1 << 20} {
			t.Run(r.name+"/headers of "+strconv.Itoa(size>>10)+"KiB", func(t *testing.T) {
				before := up.mock.Stats().Requests
				c := dialRaw(t, gw)
				c.send(chatRequest(r.path, "X-Pad: "+strings.Repeat("p", size)+"\r\n", r.with(`"hi"`)))
				resp, body := c.answerBeforeReset()
				if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !resp.Close {
					t.Fatalf("got %d (close %v), want 431 and the connection closed: %.300s", resp.StatusCode, resp.Close, body)
				}
				if code := dialectError(t, r.anthropic, body); !r.anthropic && code != "headers_too_large" {
					t.Errorf("code %q, want headers_too_large", code)
				}
				if n := up.mock.Stats().Requests - before; n != 0 {
					t.Errorf("%d requests went upstream", n)
				}
			})
		}
	}
	resp, err := http.Get(gw.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz after the matrix: %v %v", resp, err)
	}
	resp.Body.Close()
	healthy(t, gw)
}

func always(status int) func(apiRoute) int { return func(apiRoute) int { return status } }
