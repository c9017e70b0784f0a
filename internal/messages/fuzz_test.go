package messages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/internal/llm"
)

// FuzzParseRequest: any body either is refused with a 400
// invalid_request_error (as Anthropic's API answers), or becomes a chat
// request whose OpenAI body the gateway itself accepts; count_tokens'
// reading of it never panics and refuses in the same way.
func FuzzParseRequest(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/requests/*.json")
	for _, s := range seeds {
		if strings.HasSuffix(s, ".openai.json") {
			continue
		}
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if len(seeds) == 0 {
		f.Fatal("no seed requests in testdata/requests")
	}
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		refused := func(what string, err error) {
			e := llm.AsError(err)
			if e.Status != 400 || e.Type != "invalid_request_error" {
				t.Fatalf("%s: %d %s for %q: %v", what, e.Status, e.Type, body, err)
			}
		}
		if _, err := ParseCountRequest(body); err != nil {
			refused("count_tokens", err)
		}
		req, err := ParseRequest(body)
		if err != nil {
			refused("messages", err)
			return
		}
		if _, err := llm.ParseChatRequest(req.Body); err != nil {
			t.Fatalf("the translated body is refused: %v\n%s", err, req.Body)
		}
	})
}
