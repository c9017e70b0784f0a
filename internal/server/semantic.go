package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/cache"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// Semantic is the semantic cache as one config generation uses it: a
// request whose last question is close enough to one answered before,
// in the same scope (cache.SemanticQuery), gets that answer.
type Semantic struct {
	// Index holds the stored questions' vectors: the process's
	// in-process index, or pgvector shared by every replica.
	Index cache.VectorIndex
	// Embed turns a question into a unit vector of Vectors' dimension.
	Embed     func(ctx context.Context, text string) ([]float32, error)
	Enabled   bool          // cache.semantic.enabled; a project's setting overrides it
	Threshold float64       // the least cosine that is a hit; a project's setting overrides it
	Timeout   time.Duration // an embedding slower than this leaves the request uncached
	PerKey    bool          // scope the search to the key as well as the project
}

// semanticOn reports whether the semantic cache serves this exchange and
// with what threshold.
func (x *exchange) semanticOn() (*Semantic, float64, bool) {
	c := x.rt.Caching
	if c == nil || c.Semantic == nil || x.principal == nil || x.principal.NoCache {
		return nil, 0, false
	}
	s := c.Semantic
	on, threshold := s.Enabled, s.Threshold
	if o := x.principal.Cache; o != nil {
		if o.Semantic.Enabled != nil {
			on = *o.Semantic.Enabled
		}
		if o.Semantic.Threshold > 0 {
			threshold = o.Semantic.Threshold
		}
	}
	return s, threshold, on
}

// semanticLookup embeds the request's last question and, when a stored
// answer's question in its scope is close enough, serves that answer
// (x-gatehouse-cache: semantic); true when it answered. The embedding is
// kept for storing this request's own answer. An embedder that fails or
// is slower than its timeout leaves the request to go upstream.
func (x *exchange) semanticLookup(req *llm.ChatRequest, g *route.Group, rp reply) bool {
	s, threshold, on := x.semanticOn()
	if !on || !x.cache.write && !x.cache.read {
		return false
	}
	keyID := ""
	if s.PerKey {
		keyID = x.principal.KeyID
	}
	q, ok := cache.NewSemanticQuery(cacheProject(x), g.Name, keyID, req.Body)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(x.r.Context(), s.Timeout)
	t0 := x.s.now()
	vec, err := s.Embed(ctx, q.Text)
	cancel()
	x.upstreamWait += x.s.now().Sub(t0) // the embedder's time is an upstream's, not the gateway's
	if err != nil {
		if x.s.log != nil {
			x.s.log.Warn("semantic cache: embedding failed; the request goes on uncached", "request_id", x.id, "error", err.Error())
		}
		return false
	}
	x.cache.scope, x.cache.vector = q.Scope, vec
	if !x.cache.read {
		return false
	}
	key, score, found, err := s.Index.SearchVector(x.r.Context(), q.Scope, vec)
	if err != nil && x.s.log != nil {
		x.s.log.Warn("semantic cache: search failed; the request goes on uncached", "request_id", x.id, "error", err.Error())
	}
	if err != nil || !found || float64(score) < threshold {
		return false
	}
	e, ok := x.rt.Caching.Cache.Get(x.r.Context(), x.principal.Project, key)
	if !ok {
		_ = s.Index.RemoveVector(x.r.Context(), q.Scope, key) // its answer expired or was purged
		return false
	}
	return x.serveEntry(e, req, rp, account.CacheSemantic)
}

// keepVector indexes the embedding of a request whose answer was just
// stored under key.
func (x *exchange) keepVector(key cache.Key) {
	if x.cache.vector == nil {
		return
	}
	// The client has its answer; the request's context may be gone.
	ctx := context.WithoutCancel(x.r.Context())
	if err := x.rt.Caching.Semantic.Index.AddVector(ctx, x.cache.scope, key, x.cache.vector); err != nil && x.s.log != nil {
		x.s.log.Warn("semantic cache: vector not indexed", "request_id", x.id, "error", err.Error())
	}
}

// NewEmbedder returns an Embed function calling deployment d's
// embeddings endpoint (OpenAI, Gemini, Ollama or any OpenAI-compatible
// server) with one input, normalising the vector it returns to unit
// length.
func NewEmbedder(d provider.Deployment) (func(ctx context.Context, text string) ([]float32, error), error) {
	em, ok := d.Adapter.(provider.Embedder)
	if !ok {
		return nil, fmt.Errorf("provider %s (type %s) serves no embeddings", d.Provider, d.Type)
	}
	return func(ctx context.Context, text string) ([]float32, error) {
		body, err := json.Marshal(map[string]string{"model": d.Model, "input": text})
		if err != nil {
			return nil, err
		}
		req, err := llm.ParseEmbedRequest(body)
		if err != nil {
			return nil, err
		}
		hr, err := em.EmbedRequest(ctx, &d, req)
		if err != nil {
			return nil, err
		}
		resp, err := d.Client.Do(hr)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			defer resp.Body.Close()
			return nil, d.Adapter.Error(resp, &d)
		}
		c, err := em.Embedding(resp, &d, req)
		if err != nil {
			return nil, err
		}
		return unitVector(c.Body)
	}, nil
}

// unitVector reads the first embedding of an OpenAI embeddings body and
// scales it to unit length, so dot products are cosines.
func unitVector(body []byte) ([]float32, error) {
	var out struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("embedding: %w", err)
	}
	if len(out.Data) == 0 || len(out.Data[0].Embedding) == 0 {
		return nil, fmt.Errorf("embedding: the answer holds no vector")
	}
	e := out.Data[0].Embedding
	var n float64
	for _, x := range e {
		n += x * x
	}
	if n == 0 {
		return nil, fmt.Errorf("embedding: a zero vector")
	}
	n = math.Sqrt(n)
	v := make([]float32, len(e))
	for i, x := range e {
		v[i] = float32(x / n)
	}
	return v, nil
}
