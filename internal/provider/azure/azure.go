// Package azure adapts Azure OpenAI. Its bodies, streams and errors are
// OpenAI's, so the openai adapter decodes them; what differs is where a
// request goes and how it authenticates:
//
//   - the classic API, {base}/openai/deployments/{deployment}/chat/completions?api-version=…,
//     where the target's model is the deployment name;
//   - the v1 API (a base_url ending in /openai/v1), {base}/chat/completions with
//     the deployment name as "model" in the body and no api-version;
//
// and both take the key in an "api-key" header, not Authorization.
// Azure's content filter needs no translation: finish_reason
// "content_filter" passes through in the body, and a prompt refused by
// the filter is a 400 with code "content_filter" whose message is kept.
//
// It imports provider, llm and its sibling provider/openai (the one
// sibling import internal/archtest allows, because Azure OpenAI is the
// OpenAI wire format).
package azure

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
)

// Adapter is the Azure OpenAI adapter. The zero value is ready; the
// embedded OpenAI adapter decodes responses and errors.
type Adapter struct {
	openai.Adapter
}

var (
	_ provider.Adapter      = Adapter{}
	_ provider.Embedder     = Adapter{}
	_ provider.ResponsesAPI = Adapter{}
)

// ChatRequest builds the chat completions request for the deployment.
func (Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	req, err := provider.FitTranslated(d, req)
	if err != nil {
		return nil, err
	}
	accept := "application/json"
	if req.Stream {
		accept = "text/event-stream"
	}
	return newRequest(ctx, d, "/chat/completions", req.UpstreamBody(d.Model, d.StreamUsage), accept)
}

// EmbedRequest builds the embeddings request for the deployment.
func (Adapter) EmbedRequest(ctx context.Context, d *provider.Deployment, req *llm.EmbedRequest) (*http.Request, error) {
	return newRequest(ctx, d, "/embeddings", req.UpstreamBody(d.Model), "application/json")
}

// ResponsesRequest builds the Responses API request: {base}/responses on
// the v1 API, else the resource's /openai/responses?api-version=… (the
// API is not under a deployment path; the body's model names the
// deployment).
func (Adapter) ResponsesRequest(ctx context.Context, d *provider.Deployment, body []byte, stream bool) (*http.Request, error) {
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	u := strings.TrimRight(d.BaseURL, "/")
	if !IsV1(u) {
		if !strings.HasSuffix(u, "/openai") {
			u += "/openai"
		}
		u += "/responses"
		if d.APIVersion != "" {
			u += "?api-version=" + url.QueryEscape(d.APIVersion)
		}
	} else {
		u += "/responses"
	}
	r, err := provider.NewRequest(ctx, d, http.MethodPost, u, body, accept)
	if err != nil {
		return nil, err
	}
	if d.APIKey != "" {
		r.Header.Set("Api-Key", d.APIKey)
	}
	return r, nil
}

// responsesSince is the first dated api-version with the Responses API.
const responsesSince = "2025-03-01"

// HasResponsesAPI reports whether the deployment's API has the Responses
// API: the v1 API does, the classic one from 2025-03-01-preview on.
func (Adapter) HasResponsesAPI(d *provider.Deployment) bool {
	return IsV1(d.BaseURL) || d.APIVersion >= responsesSince
}

// Endpoint returns the URL of an operation ("/chat/completions",
// "/embeddings") for a deployment. BaseURL may be the resource
// (https://x.openai.azure.com), the resource's /openai path, or the v1
// API's /openai/v1; an empty APIVersion is left out of the classic URL,
// which is only useful with a server that does not need one.
func Endpoint(d *provider.Deployment, op string) string {
	base := strings.TrimRight(d.BaseURL, "/")
	if IsV1(base) {
		return base + op
	}
	if !strings.HasSuffix(base, "/openai") {
		base += "/openai"
	}
	u := base + "/deployments/" + url.PathEscape(d.Model) + op
	if d.APIVersion != "" {
		u += "?api-version=" + url.QueryEscape(d.APIVersion)
	}
	return u
}

// IsV1 reports whether base addresses Azure's v1 API, which takes the
// deployment in the body and has no api-version.
func IsV1(base string) bool {
	return strings.HasSuffix(strings.TrimRight(base, "/"), "/openai/v1")
}

// Stream decodes the SSE stream as OpenAI's, dropping the chunks Azure
// sends before the first choice that carry only prompt_filter_results:
// they have no id, object or choices, so they are not chat.completion.chunk
// objects and strict clients reject them.
func (a Adapter) Stream(resp *http.Response, d *provider.Deployment, req *llm.ChatRequest) (llm.Stream, error) {
	s, err := a.Adapter.Stream(resp, d, req)
	if err != nil {
		return nil, err
	}
	return filterStream{s}, nil
}

type filterStream struct{ llm.Stream }

func (f filterStream) Next() (llm.Chunk, error) {
	for {
		c, err := f.Stream.Next()
		if err != nil || c.Usage != nil || !promptFilterOnly(c.Data) {
			return c, err
		}
	}
}

// promptFilterOnly reports whether a chunk is Azure's annotation-only
// chunk: prompt_filter_results and no choices.
func promptFilterOnly(data []byte) bool {
	if !bytes.Contains(data, []byte(`"prompt_filter_results"`)) {
		return false
	}
	empty := false
	_ = llm.EachField(data, func(key string, v []byte, _ int) bool {
		if key == "choices" {
			t := bytes.TrimSpace(v)
			empty = bytes.Equal(t, []byte("[]")) || bytes.Equal(t, []byte("null"))
			return false
		}
		return true
	})
	return empty
}

func newRequest(ctx context.Context, d *provider.Deployment, op string, body []byte, accept string) (*http.Request, error) {
	r, err := provider.NewRequest(ctx, d, http.MethodPost, Endpoint(d, op), body, accept)
	if err != nil {
		return nil, err
	}
	if d.APIKey != "" {
		r.Header.Set("Api-Key", d.APIKey)
	}
	return r, nil
}
