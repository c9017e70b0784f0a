// Package openai adapts providers that speak the OpenAI chat completions
// and embeddings wire format: OpenAI itself and every OpenAI-compatible
// server (vLLM, llama.cpp, LM Studio, Groq, Together …). Requests pass
// through with at most a model rename and a stream_options splice, and
// responses are relayed without being re-encoded.
//
// It imports only provider and llm.
package openai

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Adapter is the OpenAI wire-format adapter. The zero value is ready.
type Adapter struct{}

var (
	_ provider.Adapter      = Adapter{}
	_ provider.Embedder     = Adapter{}
	_ provider.ResponsesAPI = Adapter{}
)

// ChatRequest builds POST {base}/chat/completions.
func (Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	req, err := provider.FitTranslated(d, req)
	if err != nil {
		return nil, err
	}
	body := req.UpstreamBody(d.Model, d.StreamUsage)
	accept := "application/json"
	if req.Stream {
		accept = "text/event-stream"
	}
	return newRequest(ctx, d, "/chat/completions", body, accept)
}

// ResponsesRequest builds POST {base}/responses with the body as given.
func (Adapter) ResponsesRequest(ctx context.Context, d *provider.Deployment, body []byte, stream bool) (*http.Request, error) {
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	return newRequest(ctx, d, "/responses", body, accept)
}

// HasResponsesAPI: OpenAI's API has it; for an OpenAI-compatible server
// the config decides (responses_api).
func (Adapter) HasResponsesAPI(*provider.Deployment) bool { return true }

// EmbedRequest builds POST {base}/embeddings.
func (Adapter) EmbedRequest(ctx context.Context, d *provider.Deployment, req *llm.EmbedRequest) (*http.Request, error) {
	return newRequest(ctx, d, "/embeddings", req.UpstreamBody(d.Model), "application/json")
}

func newRequest(ctx context.Context, d *provider.Deployment, path string, body []byte, accept string) (*http.Request, error) {
	r, err := provider.NewRequest(ctx, d, http.MethodPost, d.BaseURL+path, body, accept)
	if err != nil {
		return nil, err
	}
	h := r.Header
	if d.APIKey != "" {
		h[provider.HeaderAuthorization] = []string{"Bearer " + d.APIKey}
	}
	return r, nil
}

// Completion relays the body as it is, reading usage out of it.
func (Adapter) Completion(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (*llm.Completion, error) {
	return readCompletion(resp, d)
}

// Embedding relays the body as it is, reading usage out of it.
func (Adapter) Embedding(resp *http.Response, d *provider.Deployment, _ *llm.EmbedRequest) (*llm.Completion, error) {
	return readCompletion(resp, d)
}

func readCompletion(resp *http.Response, d *provider.Deployment) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	// The body is relayed as it is, so it must be whole: a body cut short
	// under a matching Content-Length (or by a server that closed early)
	// would otherwise reach the client as a 200 it cannot parse. The walk
	// that reads the usage checks that too.
	c := &llm.Completion{Body: body}
	c.Usage, c.HasUsage, c.Slot, err = llm.CheckUsage(body)
	if errors.Is(err, llm.ErrNotObject) {
		return nil, provider.ProtocolError(d.Provider, "a response that is JSON but not an object", nil)
	}
	if err != nil {
		return nil, provider.ProtocolError(d.Provider, "a response that is not valid JSON", err)
	}
	if !c.HasUsage && errorIn200(body) {
		// Some servers answer a failed generation with 200 and an error
		// object: it is an upstream failure (502, so retried elsewhere),
		// never a completion to bill or cache.
		return nil, provider.StatusError(d.Provider, resp, body)
	}
	return c, nil
}

// errorIn200 reports whether a 2xx body is an error object: {"error":…}
// with neither choices nor data (a completion or an embedding list).
func errorIn200(body []byte) bool {
	var top struct {
		Error   json.RawMessage `json:"error"`
		Choices json.RawMessage `json:"choices"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	k := llm.KindOf(top.Error)
	return (k == llm.KindObject || k == llm.KindString) && top.Choices == nil && top.Data == nil
}

// Error decodes OpenAI's error body.
func (Adapter) Error(resp *http.Response, d *provider.Deployment) *llm.Error {
	body, _ := provider.ReadBody(resp, 1<<20)
	return provider.StatusError(d.Provider, resp, body)
}

// Stream decodes the SSE stream. When the gateway itself turned on
// include_usage, the "usage":null members it caused are cut from each
// chunk and the trailing usage chunk is marked, so the client sees what it
// asked for.
func (Adapter) Stream(resp *http.Response, d *provider.Deployment, req *llm.ChatRequest) (llm.Stream, error) {
	return &stream{
		body:  resp.Body,
		sse:   llm.NewReader(resp.Body),
		strip: d.StreamUsage && !req.IncludeUsage,
		name:  d.Provider,
	}, nil
}

type stream struct {
	body  io.Closer
	sse   *llm.Reader
	strip bool
	name  string
	usage llm.Usage
}

func (s *stream) Close() error { return s.body.Close() }

// Pending reports whether the next event is already buffered.
func (s *stream) Pending() bool { return s.sse.HasEvent() }

func (s *stream) Next() (llm.Chunk, error) {
	for {
		ev, err := s.sse.Next()
		if err != nil {
			if err == io.EOF {
				return llm.Chunk{}, io.ErrUnexpectedEOF // the stream ended without [DONE]
			}
			return llm.Chunk{}, err
		}
		data := ev.Data
		if string(data) == "[DONE]" {
			return llm.Chunk{}, io.EOF
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		return s.chunk(data)
	}
}

// chunk inspects one event's JSON: an error object ends the stream, a
// usage object is captured, and the gateway's own usage plumbing is hidden.
func (s *stream) chunk(data []byte) (llm.Chunk, error) {
	if d, ok := quickChunk(data, s.strip); ok {
		return llm.Chunk{Data: d}, nil
	}
	var errRaw []byte
	emptyChoices := false
	cu, err := llm.CheckChunk(data, func(name, v []byte) {
		switch string(name) {
		case "choices":
			emptyChoices = bytes.Equal(bytes.TrimSpace(v), []byte("[]"))
		case "error":
			errRaw = v
		}
	})
	if err != nil {
		what := "a malformed stream event"
		if errors.Is(err, llm.ErrNotObject) {
			what = "a stream event that is JSON but not an object"
		}
		return llm.Chunk{}, &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
			Code: "upstream_error", Message: fmt.Sprintf("provider %q sent %s", s.name, what), Cause: err}
	}
	if errRaw != nil {
		e := provider.StatusError(s.name, &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}},
			append(append([]byte(`{"error":`), errRaw...), '}'))
		return llm.Chunk{}, e
	}
	c := llm.Chunk{Data: data}
	if cu.HasUsage {
		s.usage = cu.Usage
		c.Usage = &s.usage
		c.UsageOnly = emptyChoices
		c.UsageSlot = cu.Slot
	} else if s.strip && cu.End > 0 {
		c.Data = cutMember(data, cu.At, cu.End)
	}
	return c, nil
}

// quickChunk relays the two chunks that are nearly all of a stream
// without a scan of their JSON: an object with neither a "usage" nor an
// "error" member, and one whose only "usage" is `,"usage":null`, as
// OpenAI sends on every chunk but the last when usage was asked for
// (with strip set, that member is cut: the client did not ask for it).
// A quoted key cannot hide inside a JSON string, where its quotes would
// be escaped, so looking at the bytes is exact; anything else (ok
// false) takes the full scan. It tells them apart in one pass over the
// chunk's quotes, where three substring searches read it five times.
func quickChunk(data []byte, strip bool) ([]byte, bool) {
	d := bytes.TrimSpace(data)
	if len(d) < 2 || d[0] != '{' || d[len(d)-1] != '}' {
		return nil, false
	}
	usages, nullAt, ok := lookAtKeys(d)
	switch {
	case !ok:
		return nil, false
	case usages == 0:
		return data, true
	case nullAt < 0:
		return nil, false
	case !strip:
		return data, true
	}
	return append(d[:nullAt], d[nullAt+len(nullUsage):]...), true
}

// nullUsage is the member OpenAI adds to every chunk before the last.
const nullUsage = `,"usage":null`

// lookAtKeys reports how many times `"usage"` occurs in d and where the
// `,"usage":null` of the one that is such a member starts (-1 if it is
// not). ok is false when d holds `"error"` or more than one "usage",
// which no quick path takes. (It counts overlapping occurrences,
// `"usage"usage"` as two, where bytes.Count found one; either way no
// quick path takes such a chunk, since a "usage" followed by `usage"`
// is not followed by ":null".)
//
// Both names are five letters between quotes, so it looks only where a
// '"' has another six bytes on: it tests eight places at once for
// that, with a word of d XORed with quotes and OR'd with the word six
// bytes on (two such words a round), and reads the few five-letter keys
// (index, delta, model …) that it finds. Visiting each quote of a chunk with IndexByte cost more
// than the substring searches it replaced.
func lookAtKeys(d []byte) (usages, nullAt int, ok bool) {
	const quotes = 0x2222222222222222 // '"' in every byte
	nullAt = -1
	i := 0
	for ; i+22 <= len(d); i += 16 {
		w := d[i : i+22]
		lo := zeroBytes((binary.LittleEndian.Uint64(w) ^ quotes) | (binary.LittleEndian.Uint64(w[6:]) ^ quotes))
		hi := zeroBytes((binary.LittleEndian.Uint64(w[8:]) ^ quotes) | (binary.LittleEndian.Uint64(w[14:]) ^ quotes))
		if lo|hi == 0 {
			continue
		}
		for ; lo != 0; lo &= lo - 1 {
			if !keyAt(d, i+bits.TrailingZeros64(lo)/8, &usages, &nullAt) {
				return 0, -1, false
			}
		}
		for ; hi != 0; hi &= hi - 1 {
			if !keyAt(d, i+8+bits.TrailingZeros64(hi)/8, &usages, &nullAt) {
				return 0, -1, false
			}
		}
	}
	if i+7 > len(d) || len(d) < 22 {
		for q := i; q+7 <= len(d); q++ { // a chunk too short for a round, one place at a time
			if d[q] == '"' && d[q+6] == '"' && !keyAt(d, q, &usages, &nullAt) {
				return 0, -1, false
			}
		}
		return usages, nullAt, true
	}
	// The last few places: one more round over the last 22 bytes, which
	// tests places the rounds above tested already (the first s of its
	// 16); their bits are cleared. It replaced a loop of a byte at a
	// time over up to 15 places (about 100 instructions a chunk).
	j := len(d) - 22
	s := i - j
	w := d[j:]
	lo := zeroBytes((binary.LittleEndian.Uint64(w) ^ quotes) | (binary.LittleEndian.Uint64(w[6:]) ^ quotes))
	hi := zeroBytes((binary.LittleEndian.Uint64(w[8:]) ^ quotes) | (binary.LittleEndian.Uint64(w[14:]) ^ quotes))
	lo &= ^uint64(0) << (8 * s)
	hi &= ^uint64(0) << (8 * max(s-8, 0))
	for ; lo != 0; lo &= lo - 1 {
		if !keyAt(d, j+bits.TrailingZeros64(lo)/8, &usages, &nullAt) {
			return 0, -1, false
		}
	}
	for ; hi != 0; hi &= hi - 1 {
		if !keyAt(d, j+8+bits.TrailingZeros64(hi)/8, &usages, &nullAt) {
			return 0, -1, false
		}
	}
	return usages, nullAt, true
}

// keyAt looks at the seven bytes from d[q], a '"' with another six on,
// for lookAtKeys; false means d takes no quick path.
func keyAt(d []byte, q int, usages, nullAt *int) bool {
	switch string(d[q+1 : q+6]) {
	case "error":
		return false
	case "usage":
		if *usages++; *usages > 1 {
			return false
		}
		if q > 0 && d[q-1] == ',' && bytes.HasPrefix(d[q+len(`"usage"`):], []byte(":null")) {
			*nullAt = q - 1
		}
	}
	return true
}

// zeroBytes has the high bit of each byte of x that is zero set, and no
// other bit: each byte is tested on its own, with no carry between them
// (x&0x7f plus 0x7f stays within the byte), so there are no false hits.
func zeroBytes(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((x&low7 + low7) | x | low7)
}

// cutMember removes the object member whose value spans data[vs:ve],
// together with its key and one adjoining comma. It edits data in place.
func cutMember(data []byte, vs, ve int) []byte {
	ks := bytes.LastIndexByte(data[:vs], ':')
	if ks < 0 {
		return data
	}
	ks = bytes.LastIndexByte(data[:ks], '"') // closing quote of the key
	if ks < 0 {
		return data
	}
	ks = bytes.LastIndexByte(data[:ks], '"') // opening quote
	if ks < 0 {
		return data
	}
	start, end := ks, ve
	if p := prevNonSpace(data, start); p >= 0 && data[p] == ',' {
		start = p
	} else if n := nextNonSpace(data, end); n < len(data) && data[n] == ',' {
		end = n + 1
	}
	return append(data[:start], data[end:]...)
}

func prevNonSpace(b []byte, i int) int {
	for i--; i >= 0; i-- {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return i
		}
	}
	return -1
}

func nextNonSpace(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return i
		}
	}
	return i
}
