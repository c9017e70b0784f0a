package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"gatehouse/internal/llm"
	"gatehouse/internal/messages"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/azure"
	"gatehouse/internal/provider/openai"
)

// TestTranslatedParametersFitTheUpstream: an Anthropic request with
// top_k and a thinking budget reaches OpenAI and Azure without the
// parameters they refuse (reasoning_effort kept for reasoning models),
// openai-compatible servers with both unless drop_unsupported says
// otherwise; a request in OpenAI's own dialect is sent as it came.
func TestTranslatedParametersFitTheUpstream(t *testing.T) {
	anthropic := `{"model":"chat","max_tokens":4096,"top_k":40,"thinking":{"type":"enabled","budget_tokens":2048},
		"messages":[{"role":"user","content":"Think it over."}]}`
	for _, c := range []struct {
		name         string
		d            provider.Deployment
		topK, effort bool
		adapter      provider.Adapter
	}{
		{"openai gpt-4o", provider.Deployment{Type: "openai", Model: "gpt-4o"}, false, false, openai.Adapter{}},
		{"openai o3-mini", provider.Deployment{Type: "openai", Model: "o3-mini"}, false, true, openai.Adapter{}},
		{"openai gpt-5 behind a router", provider.Deployment{Type: "openai", Model: "openai/gpt-5-mini"}, false, true, openai.Adapter{}},
		{"openai-compatible", provider.Deployment{Type: "openai-compatible", Model: "llama-3.1-8b"}, true, true, openai.Adapter{}},
		{"openai-compatible, drop_unsupported", provider.Deployment{Type: "openai-compatible", Model: "llama-3.1-8b", DropUnsupported: true}, false, false, openai.Adapter{}},
		{"azure deployment", provider.Deployment{Type: "azure", Model: "prod-gpt4o", APIVersion: "2024-10-21"}, false, false, azure.Adapter{}},
	} {
		req, err := messages.ParseRequest([]byte(anthropic))
		if err != nil {
			t.Fatal(err)
		}
		d := c.d
		d.BaseURL = "http://upstream.test/v1"
		body := upstreamBody(t, c.adapter, &d, req)
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, body)
		}
		if _, ok := got["top_k"]; ok != c.topK {
			t.Errorf("%s: top_k sent = %v, want %v\n%s", c.name, ok, c.topK, body)
		}
		if _, ok := got["reasoning_effort"]; ok != c.effort {
			t.Errorf("%s: reasoning_effort sent = %v, want %v\n%s", c.name, ok, c.effort, body)
		}
		if got["max_completion_tokens"] != 4096.0 || got["messages"] == nil {
			t.Errorf("%s: the rest of the request was lost:\n%s", c.name, body)
		}
	}

	// OpenAI's own dialect: what the client wrote goes through, refused or not.
	own := `{"model":"chat","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`
	req, err := llm.ParseChatRequest([]byte(own))
	if err != nil {
		t.Fatal(err)
	}
	d := provider.Deployment{Type: "openai", Model: "chat", BaseURL: "http://upstream.test/v1"}
	if body := upstreamBody(t, openai.Adapter{}, &d, req); string(body) != own {
		t.Errorf("a client's own request was changed:\n%s", body)
	}
}

func upstreamBody(t *testing.T, a provider.Adapter, d *provider.Deployment, req *llm.ChatRequest) []byte {
	t.Helper()
	r, err := a.ChatRequest(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
