// Package provider defines how gatehouse talks to model providers: the
// Adapter each provider implements, the Deployment (one model at one
// provider) a request is routed to, the upstream call with its deadlines,
// and the classification of upstream failures into gateway errors.
//
// Adapters translate; they do no I/O of their own, so each is tested from
// wire fixtures. The upstream call itself (Call) lives here, once, for all
// providers. Provider packages below this one import only provider and llm.
package provider

import (
	"context"
	"net/http"

	"gatehouse/internal/llm"
)

// Adapter turns canonical requests into a provider's HTTP requests and the
// provider's responses back into OpenAI-shaped ones.
type Adapter interface {
	// ChatRequest builds the upstream request for a chat completion.
	ChatRequest(ctx context.Context, d *Deployment, req *llm.ChatRequest) (*http.Request, error)
	// Completion decodes a successful non-streamed response.
	Completion(resp *http.Response, d *Deployment, req *llm.ChatRequest) (*llm.Completion, error)
	// Stream decodes a successful streamed response; the Stream owns resp.Body.
	Stream(resp *http.Response, d *Deployment, req *llm.ChatRequest) (llm.Stream, error)
	// Error decodes a non-2xx response into a gateway error that keeps the
	// provider's status and message.
	Error(resp *http.Response, d *Deployment) *llm.Error
}

// Embedder is implemented by adapters whose provider serves embeddings.
type Embedder interface {
	EmbedRequest(ctx context.Context, d *Deployment, req *llm.EmbedRequest) (*http.Request, error)
	Embedding(resp *http.Response, d *Deployment, req *llm.EmbedRequest) (*llm.Completion, error)
}

// ResponsesAPI is implemented by adapters whose provider can serve
// OpenAI's Responses API itself (OpenAI, Azure OpenAI, and OpenAI-
// compatible servers that have it): a POST /v1/responses is then sent to
// it as the client wrote it, rather than translated to chat completions.
type ResponsesAPI interface {
	// ResponsesRequest builds the upstream request for a Responses body
	// already fitted to the deployment (its model, its conversation).
	ResponsesRequest(ctx context.Context, d *Deployment, body []byte, stream bool) (*http.Request, error)
	// HasResponsesAPI reports whether this deployment's server has the
	// API (an Azure api-version older than the API has not).
	HasResponsesAPI(d *Deployment) bool
}

// Discoverer is implemented by adapters whose provider can list the
// models it serves (Ollama's /api/tags), so they are routable without a
// models entry. Like every adapter method, it does no I/O itself.
type Discoverer interface {
	ModelsRequest(ctx context.Context, d *Deployment) (*http.Request, error)
	Models(resp *http.Response, d *Deployment) ([]string, error)
}

// Deployment is one model served by one configured provider: where a
// request finally goes. It is immutable once built; a config reload builds
// new ones.
type Deployment struct {
	Provider    string // the provider's configured name
	Type        string // the provider's type (openai, openai-compatible, mock …)
	Model       string // the model id the provider knows
	BaseURL     string // without a trailing slash
	APIKey      string // never logged
	Header      http.Header
	StreamUsage bool // ask the upstream for usage in streams
	Local       bool
	// LocalPricing makes the deployment cost nothing unless the config
	// or the admin API prices its model: a server of one's own (a local
	// provider, Ollama, a llama.cpp, vLLM or LM Studio preset) has no
	// per-token price, and a budgeted key may still use it.
	LocalPricing bool
	// DropUnsupported makes translating adapters drop request parameters
	// the provider cannot honour instead of refusing them with a 400.
	DropUnsupported bool
	// ResponsesAPI sends Responses API requests to this deployment as
	// they are (its adapter is a ResponsesAPI); false translates them to
	// chat completions.
	ResponsesAPI bool
	APIVersion   string // azure: the api-version query parameter
	Region       string // bedrock: the AWS region
	Adapter      Adapter
	Client       *http.Client
	// MaxResponseBytes bounds a non-streamed upstream body (see
	// ResponseLimit); 0: MaxResponseBytes.
	MaxResponseBytes int64
}
