package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestAzureDialect(t *testing.T) {
	_, ts := start(t, Options{APIKey: "az-secret"})
	key := map[string]string{"Api-Key": "az-secret"}
	chat := chatJSON("gpt-4o", "hello", false, false)
	for _, c := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		code             string // Azure's error code, for failures
	}{
		{"classic", "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", chat, key, 200, ""},
		{"classic preview version", "/openai/deployments/prod-4o/chat/completions?api-version=2025-04-01-preview", chat, key, 200, ""},
		{"classic without model", "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21",
			`{"messages":[{"role":"user","content":"hi"}]}`, key, 200, ""},
		{"v1", "/openai/v1/chat/completions", chat, key, 200, ""},
		{"v1 embeddings", "/openai/v1/embeddings", `{"model":"emb","input":"hi"}`, key, 200, ""},
		{"classic embeddings", "/openai/deployments/emb/embeddings?api-version=2024-10-21", `{"input":"hi"}`, key, 200, ""},
		{"no key", "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", chat, nil, 401, "401"},
		{"bearer is not api-key", "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", chat,
			map[string]string{"Authorization": "Bearer az-secret"}, 401, "401"},
		{"wrong key", "/openai/v1/chat/completions", chat, map[string]string{"Api-Key": "nope"}, 401, "401"},
		{"no api-version", "/openai/deployments/prod-4o/chat/completions", chat, key, 404, "404"},
		{"bad api-version", "/openai/deployments/prod-4o/chat/completions?api-version=latest", chat, key, 404, "404"},
		{"dated version on v1", "/openai/v1/chat/completions?api-version=2024-10-21", chat, key, 400, "BadRequest"},
		{"unknown operation", "/openai/deployments/prod-4o/completions?api-version=2024-10-21", chat, key, 404, "404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, ts, http.MethodPost, c.path, c.body, c.hdr)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.code == "" {
				return
			}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != c.code || e.Error.Message == "" {
				t.Fatalf("not Azure's error shape with code %q: %s", c.code, body)
			}
		})
	}
}

func TestAzureAnswersLikeOpenAI(t *testing.T) {
	_, ts := start(t, Options{APIKey: "k"})
	resp, body := do(t, ts, http.MethodPost, "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21",
		`{"messages":[{"role":"user","content":"hello azure"}],"stream":true,"stream_options":{"include_usage":true}}`,
		map[string]string{"Api-Key": "k"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	evs := events(t, body)
	if evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[0], `"model":"prod-4o"`) {
		t.Fatalf("events %q", evs)
	}
	var text strings.Builder
	for _, ev := range evs[:len(evs)-1] {
		var ch struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if !strings.Contains(text.String(), "hello azure") {
		t.Fatalf("reply %q does not quote the prompt", text.String())
	}
}
