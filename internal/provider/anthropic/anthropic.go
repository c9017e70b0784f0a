// Package anthropic adapts Anthropic's Messages API (POST /v1/messages):
// it translates OpenAI chat completion requests into Messages requests and
// Anthropic's messages, streaming events and errors back into OpenAI's
// shapes. Anthropic serves no embeddings, so the adapter is not an
// Embedder.
//
// What cannot be expressed faithfully is refused with a 400 naming the
// parameter (or dropped when the provider is configured with
// drop_unsupported); see translate for the list.
//
// It does no I/O and imports only provider and llm.
package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// DefaultBaseURL is where requests go when the provider has no base_url.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version header sent unless the provider's
// configured headers set one.
const Version = "2023-06-01"

// Adapter is the Anthropic Messages API adapter. The zero value is ready.
type Adapter struct {
	// Now stamps the "created" field of translated responses; nil means
	// time.Now. Tests set it to get reproducible bodies.
	Now func() time.Time
}

var _ provider.Adapter = Adapter{}

func (a Adapter) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// ChatRequest builds POST {base}/v1/messages from the OpenAI request.
func (a Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	p, err := req.Params()
	if err != nil {
		return nil, err
	}
	mr, err := translate(d, p)
	if err != nil {
		return nil, err
	}
	body, err := encodeRequest(mr)
	if err != nil {
		return nil, fmt.Errorf("provider %q: encode messages request: %w", d.Provider, err)
	}
	accept := "application/json"
	if req.Stream {
		accept = "text/event-stream"
	}
	r, err := provider.NewRequest(ctx, d, http.MethodPost, d.BaseURL+"/v1/messages", body, accept)
	if err != nil {
		return nil, err
	}
	h := r.Header
	// A configured anthropic-version (or anthropic-beta) header wins, so
	// a deployment can pin a newer API version without a code change.
	if h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", Version)
	}
	if d.APIKey != "" {
		h.Set("X-Api-Key", d.APIKey)
	}
	return r, nil
}

// Error decodes Anthropic's {"type":"error","error":{"type","message"}}
// keeping the status (529 overloaded included), message, error type and
// Retry-After.
func (Adapter) Error(resp *http.Response, d *provider.Deployment) *llm.Error {
	body, _ := provider.ReadBody(resp, 1<<20)
	return provider.StatusError(d.Provider, resp, body)
}

// errorIn200 is Anthropic's error object answered with a 200: the
// provider's type and message reach the client (its key, should a proxy
// in between have echoed it, does not), with Anthropic's status for the
// type, a server-side one as 502 like any upstream failure.
func errorIn200(d *provider.Deployment, typ, message string) *llm.Error {
	status := statusForType(typ)
	if status >= 500 {
		status = http.StatusBadGateway
	}
	if d.APIKey != "" {
		message = strings.ReplaceAll(message, d.APIKey, "[redacted]")
	}
	return &llm.Error{Kind: llm.KindUpstreamStatus, Status: status, Type: typ, Message: message,
		Cause: fmt.Errorf("provider %q: error object in a 200: %s", d.Provider, typ)}
}

// statusForType is the HTTP status Anthropic uses for each error type; an
// error event inside a stream carries only the type.
func statusForType(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "api_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529 // Anthropic's own "overloaded" status
	}
	return http.StatusBadGateway
}
