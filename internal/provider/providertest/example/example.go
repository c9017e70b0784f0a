// Package example is the smallest complete provider: the worked example
// of docs/providers.md. Its "parrot" API is made up, with one endpoint,
// POST {base}/generate, that takes
//
//	{"model":"m","stream":false,"messages":[{"role":"user","text":"hi"}],"tools":["get_weather"]}
//
// and answers, whole,
//
//	{"text":"…","call":{"name":"get_weather","arguments":"{…}"},"stop":"end|max|call","usage":{"in":3,"out":5}}
//
// or, streamed, as one such JSON object per line, whose last carries
// "stop" and "usage". Errors are {"error":"message"} with an HTTP status.
//
// It lives in the test tree: the gateway does not register it, the
// registry test in this package does, and the conformance suite checks it.
package example

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// DefaultBaseURL is where a parrot server listens unless told otherwise.
const DefaultBaseURL = "http://127.0.0.1:7777"

// Type is the "parrot" provider type: the registry entry, one per
// provider package.
func Type() provider.Type {
	return provider.Type{Name: "parrot", New: func(s provider.Settings, d *provider.Deployment) error {
		d.BaseURL = provider.BaseURLOr(s.BaseURL, DefaultBaseURL)
		if d.APIKey == "" {
			return errors.New("api_key is required")
		}
		d.Adapter = Adapter{}
		return nil
	}}
}

// Adapter translates between OpenAI's chat completions and parrot's API.
// Like every adapter it does no I/O: the gateway makes the call.
type Adapter struct{}

var _ provider.Adapter = Adapter{}

type message struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

type call struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type answer struct {
	Text  string `json:"text"`
	Call  *call  `json:"call"`
	Stop  string `json:"stop"`
	Usage *struct {
		In  int `json:"in"`
		Out int `json:"out"`
	} `json:"usage"`
}

// ChatRequest translates the OpenAI request. Parrot has no sampling
// settings, so a request that sets one is refused with a 400 naming it,
// or the setting dropped with the provider's drop_unsupported.
func (Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	p, err := req.Params()
	if err != nil {
		return nil, err
	}
	if p.Temperature != nil && !d.DropUnsupported {
		return nil, provider.Unsupported(d, "temperature")
	}
	body := struct {
		Model    string    `json:"model"`
		Stream   bool      `json:"stream"`
		Messages []message `json:"messages"`
		Tools    []string  `json:"tools,omitempty"`
	}{Model: d.Model, Stream: p.Stream}
	for i := range p.Messages {
		m := &p.Messages[i]
		body.Messages = append(body.Messages, message{Role: m.Role, Text: m.TextContent()})
	}
	for _, t := range p.Tools {
		body.Tools = append(body.Tools, t.Name)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	r, err := provider.NewRequest(ctx, d, http.MethodPost, d.BaseURL+"/generate", b, "application/json")
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+d.APIKey)
	return r, nil
}

// Completion translates a whole answer.
func (Adapter) Completion(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, provider.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil || a.Usage == nil {
		return nil, provider.ProtocolError(d.Provider, "an answer that is not parrot's JSON", err)
	}
	msg := llm.ResponseMessage{Role: llm.RoleAssistant, Content: llm.Str(a.Text)}
	if a.Call != nil {
		msg.ToolCalls = []llm.ToolCallJSON{{ID: "call_0", Type: "function",
			Function: llm.FunctionCall{Name: a.Call.Name, Arguments: a.Call.Arguments}}}
		if a.Text == "" {
			msg.Content = nil
		}
	}
	usage := llm.Usage{PromptTokens: a.Usage.In, CompletionTokens: a.Usage.Out}
	return llm.NewCompletion(&llm.ChatCompletion{ID: "chatcmpl-parrot", Model: d.Model,
		Choices: []llm.Choice{{Message: msg, FinishReason: finish(a.Stop)}}, Usage: usage.Wire()})
}

// Stream translates the answer's lines into OpenAI chunks: the role
// first, a chunk per line, the finish reason, then the usage.
func (Adapter) Stream(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (llm.Stream, error) {
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 4096), provider.MaxResponseBytes)
	started := false
	chunk := func(delta llm.Delta, reason *string) *llm.ChatChunk {
		return &llm.ChatChunk{ID: "chatcmpl-parrot", Model: d.Model, Choices: []llm.ChunkChoice{{Delta: delta, FinishReason: reason}}}
	}
	decode := func(emit func(*llm.ChatChunk)) error {
		if !lines.Scan() {
			if err := lines.Err(); err != nil {
				return err
			}
			return io.ErrUnexpectedEOF // the stream ended before its last line
		}
		var a answer
		if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
			return provider.ProtocolError(d.Provider, "a stream line that is not parrot's JSON", err)
		}
		if !started {
			started = true
			emit(chunk(llm.Delta{Role: llm.RoleAssistant, Content: llm.Str("")}, nil))
		}
		if a.Text != "" {
			emit(chunk(llm.Delta{Content: llm.Str(a.Text)}, nil))
		}
		if a.Call != nil {
			emit(chunk(llm.Delta{ToolCalls: []llm.ToolCallDelta{{ID: "call_0", Type: "function",
				Function: llm.FunctionCallDelta{Name: a.Call.Name, Arguments: a.Call.Arguments}}}}, nil))
		}
		if a.Stop == "" {
			return nil
		}
		reason := finish(a.Stop)
		emit(chunk(llm.Delta{}, &reason))
		if a.Usage != nil {
			usage := llm.Usage{PromptTokens: a.Usage.In, CompletionTokens: a.Usage.Out}
			emit(&llm.ChatChunk{ID: "chatcmpl-parrot", Model: d.Model, Usage: usage.Wire()})
		}
		return io.EOF
	}
	return &provider.ChunkStream{Body: resp.Body, Decode: decode}, nil
}

// Error keeps parrot's status and message.
func (Adapter) Error(resp *http.Response, d *provider.Deployment) *llm.Error {
	body, _ := provider.ReadBody(resp, 1<<20)
	return provider.StatusError(d.Provider, resp, body)
}

func finish(stop string) string {
	switch stop {
	case "max":
		return llm.FinishLength
	case "call":
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}
