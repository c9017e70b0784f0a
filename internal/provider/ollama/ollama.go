// Package ollama adapts Ollama's native API: POST /api/chat (NDJSON
// streaming), POST /api/embed and GET /api/tags, which lists the models a
// box has pulled so gatehouse can route to each without a models entry.
//
// The native API is used rather than Ollama's OpenAI-compatible /v1
// because only it takes runtime options (num_ctx, num_predict …), thinking
// levels and JSON-schema formats, and reports token counts on every
// answer, streamed or not.
//
// It imports only provider and llm.
package ollama

import (
	"context"
	"net/http"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// DefaultBaseURL is where an Ollama server listens unless told otherwise.
const DefaultBaseURL = "http://localhost:11434"

// Adapter is the Ollama adapter. The zero value is ready.
type Adapter struct{}

var (
	_ provider.Adapter    = Adapter{}
	_ provider.Embedder   = Adapter{}
	_ provider.Discoverer = Adapter{}
)

// ChatRequest builds POST {base}/api/chat from the OpenAI request.
func (Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	p, err := req.Params()
	if err != nil {
		return nil, err
	}
	body, err := encodeChat(d, p)
	if err != nil {
		return nil, err
	}
	accept := "application/json"
	if p.Stream {
		accept = "application/x-ndjson"
	}
	return newRequest(ctx, d, http.MethodPost, "/api/chat", body, accept)
}

// ModelsRequest builds GET {base}/api/tags, the list of pulled models.
func (Adapter) ModelsRequest(ctx context.Context, d *provider.Deployment) (*http.Request, error) {
	return newRequest(ctx, d, http.MethodGet, "/api/tags", nil, "application/json")
}

func newRequest(ctx context.Context, d *provider.Deployment, method, path string, body []byte, accept string) (*http.Request, error) {
	r, err := provider.NewRequest(ctx, d, method, d.BaseURL+path, body, accept)
	if err != nil {
		return nil, err
	}
	h := r.Header
	// A local Ollama ignores credentials; one behind an authenticating
	// proxy, or ollama.com, takes a bearer token.
	if d.APIKey != "" {
		h.Set("Authorization", "Bearer "+d.APIKey)
	}
	return r, nil
}

// Error decodes Ollama's {"error":"…"} body, keeping its status (a model
// that is not pulled stays a 404) and Retry-After.
func (Adapter) Error(resp *http.Response, d *provider.Deployment) *llm.Error {
	body, _ := provider.ReadBody(resp, 1<<20)
	return provider.StatusError(d.Provider, resp, body)
}
