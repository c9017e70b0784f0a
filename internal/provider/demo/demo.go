// Package demo is the "mock" provider type: a small deterministic model
// that runs inside the gateway, so `make run` works with no provider keys
// and no network. It speaks OpenAI's chat completions (whole or streamed,
// with usage) and embeddings through the openai adapter, served in-process
// by provider.HandlerTransport.
//
// It is deliberately not the test emulator (internal/mockllm, behind
// cmd/mockllm): that one emulates six providers' wire formats and their
// failures in some 6,000 lines the production binary has no use for. A
// build tag would have kept the emulator in a special build instead, but
// then the binary people run would differ from the one the demo shows.
//
// It imports provider and its sibling
// provider/openai, whose wire format it speaks (internal/archtest allows
// that one import).
package demo

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
)

// Type is the "mock" provider type. Two request headers, set in the
// provider's `headers`, pace its answers so streaming is visible:
// x-mock-ttft (a Go duration before the first token) and x-mock-tps
// (tokens per second after it).
func Type() provider.Type {
	return provider.Type{Name: "mock", New: func(s provider.Settings, d *provider.Deployment) error {
		d.BaseURL = "http://mock.gatehouse.internal/v1"
		d.Adapter = openai.Adapter{}
		d.Client = &http.Client{Transport: provider.HandlerTransport{Handler: Model{}}}
		return nil
	}}
}

// EmbeddingDimensions is the length of the demo's embedding vectors.
const EmbeddingDimensions = 64

// Model is the demo model's HTTP handler. The zero value is ready; it
// keeps no state, so one value serves every request.
type Model struct {
	// Now and Sleep are the clock; nil means the real one. Tests pass
	// their own so pacing costs no wall-clock time.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

func (m Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		m.chat(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/embeddings"):
		m.embeddings(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found_error", "the demo model serves POST /v1/chat/completions and /v1/embeddings only")
	}
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// Reply is what the demo model answers to a last user message.
func Reply(said string) string {
	return "Hello from the gatehouse demo model. You said: " + said
}

func (m Model) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request body is not valid JSON: "+err.Error())
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages must not be empty")
		return
	}
	prompt := 0
	said := ""
	for _, msg := range req.Messages {
		text := contentText(msg.Content)
		prompt += countTokens(text) + 3
		if msg.Role == "user" {
			said = text
		}
	}
	words := strings.Fields(Reply(said))
	finish := "stop"
	limit := req.MaxCompletionTokens
	if limit == 0 {
		limit = req.MaxTokens
	}
	if limit > 0 && len(words) > limit {
		words, finish = words[:limit], "length"
	}
	id := fmt.Sprintf("chatcmpl-demo%x", fnv64(said))
	created := m.now().Unix()
	usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + len(words)}
	pace := pacing(r.Header)
	if err := m.sleep(r.Context(), pace.ttft); err != nil {
		return
	}
	if !req.Stream {
		writeJSON(w, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
				"message": map[string]any{"role": "assistant", "content": strings.Join(words, " ")}}},
			"usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any) {
		event(w, f, map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, word := range words {
		if i > 0 {
			word = " " + word
			if err := m.sleep(r.Context(), pace.perToken); err != nil {
				return
			}
		}
		chunk(map[string]any{"content": word}, nil)
	}
	chunk(map[string]any{}, finish)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		event(w, f, map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage})
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if f != nil {
		f.Flush()
	}
}

// contentText is a message's text: a string, or the text parts of an array.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, " ")
}

// countTokens counts a text's words: the demo's tokenizer.
func countTokens(s string) int { return len(strings.Fields(s)) }

func (m Model) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request body is not valid JSON: "+err.Error())
		return
	}
	var inputs []string
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		inputs = []string{one}
	} else if json.Unmarshal(req.Input, &inputs) != nil || len(inputs) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input must be a string or a non-empty array of strings")
		return
	}
	data := make([]any, len(inputs))
	tokens := 0
	for i, in := range inputs {
		v := Embed(in)
		tokens += countTokens(in)
		var embedding any = v
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			embedding = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": embedding}
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// Embed is the demo's embedding of a text: a unit vector of hashed word
// counts, so texts sharing words lie close together and equal texts get
// equal vectors.
func Embed(text string) []float32 {
	v := make([]float32, EmbeddingDimensions)
	for _, word := range strings.Fields(strings.ToLower(text)) {
		v[fnv64(word)%EmbeddingDimensions]++
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		v[0], norm = 1, 1
	}
	scale := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= scale
	}
	return v
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// pace is the timing the request's headers ask for.
type pace struct{ ttft, perToken time.Duration }

func pacing(h http.Header) pace {
	var p pace
	if d, err := time.ParseDuration(h.Get("X-Mock-Ttft")); err == nil && d > 0 {
		p.ttft = d
	}
	if tps, err := strconv.ParseFloat(h.Get("X-Mock-Tps"), 64); err == nil && tps > 0 {
		p.perToken = time.Duration(float64(time.Second) / tps)
	}
	return p
}

func (m Model) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m Model) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if m.Sleep != nil {
		return m.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func event(w http.ResponseWriter, f http.Flusher, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(append([]byte("data: "), b...), '\n', '\n'))
	if f != nil {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
