// Package gemini adapts the Google AI Gemini API (generativelanguage.
// googleapis.com): chat completions become generateContent and
// streamGenerateContent (server-sent events) requests, embeddings become
// batchEmbedContents, and the answers are translated back into OpenAI's
// shapes — finish reasons, tool calls, reasoning and usage included.
//
// The API key travels in the x-goog-api-key header, never in the URL,
// so it cannot leak into access logs. The package does no I/O.
//
// It imports only provider and llm.
package gemini

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// DefaultBaseURL is where the Gemini API lives when base_url is not set.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// Adapter is the Gemini adapter. The zero value is ready.
type Adapter struct{}

var (
	_ provider.Adapter  = Adapter{}
	_ provider.Embedder = Adapter{}
)

// ChatRequest builds POST {base}/models/{model}:generateContent, or
// :streamGenerateContent?alt=sse for a stream.
func (Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	p, err := req.Params()
	if err != nil {
		return nil, err
	}
	g, err := translate(d, p)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("provider %q: encode gemini request: %w", d.Provider, err)
	}
	method, accept := ":generateContent", "application/json"
	if req.Stream {
		method, accept = ":streamGenerateContent?alt=sse", "text/event-stream"
	}
	return newRequest(ctx, d, method, body, accept)
}

func newRequest(ctx context.Context, d *provider.Deployment, method string, body []byte, accept string) (*http.Request, error) {
	u := d.BaseURL + "/" + escapeModel(modelPath(d.Model)) + method
	r, err := provider.NewRequest(ctx, d, http.MethodPost, u, body, accept)
	if err != nil {
		return nil, err
	}
	if d.APIKey != "" {
		r.Header.Set("X-Goog-Api-Key", d.APIKey)
	}
	return r, nil
}

// escapeModel escapes each segment of a model's resource name.
func escapeModel(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// The response shapes of generateContent. A streamed event has the same
// shape, which is why error is declared here too: Gemini may end a stream
// with an error object.

type generateResponse struct {
	Candidates     []candidate     `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	ModelVersion   string          `json:"modelVersion"`
	ResponseID     string          `json:"responseId"`
	Error          *apiError       `json:"error"`
}

type candidate struct {
	Content      *content `json:"content"`
	FinishReason string   `json:"finishReason"`
	Index        int      `json:"index"`
}

type promptFeedback struct {
	BlockReason string `json:"blockReason"`
}

type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
}

// usage maps Gemini's counts onto OpenAI's: thoughts are completion
// tokens (OpenAI counts reasoning inside completion_tokens, and both bill
// them as output), and tool-use prompts are prompt tokens.
func (u *usageMetadata) usage() llm.Usage {
	out := llm.Usage{
		PromptTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
		CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedTokens:     u.CachedContentTokenCount,
		ReasoningTokens:  u.ThoughtsTokenCount,
	}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	return out
}

// finishReason maps Gemini's finish reasons. A safety or policy block is
// content_filter and a broken function call is malformed_tool_call; a
// reason with no OpenAI equivalent (OTHER, unspecified, or one added after
// this was written) is "error", never "stop".
func finishReason(reason string, calledTools bool) string {
	switch reason {
	case "STOP":
		if calledTools {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case "MAX_TOKENS":
		return llm.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return llm.FinishContentFilter
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
		return llm.FinishMalformedToolCall
	}
	return llm.FinishError
}

// Completion translates a generateContent response.
func (Adapter) Completion(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var g generateResponse
	if err := json.Unmarshal(body, &g); err != nil {
		return nil, provider.ProtocolError(d.Provider, "a response that is not a GenerateContentResponse", err)
	}
	if g.Error != nil {
		return nil, g.Error.gatewayError(d.Provider, http.StatusBadGateway, nil)
	}
	cc := &llm.ChatCompletion{ID: completionID(g.ResponseID), Created: time.Now().Unix(), Model: modelName(&g, d)}
	ids := newCallIDs(g.ResponseID)
	sort.SliceStable(g.Candidates, func(i, j int) bool { return g.Candidates[i].Index < g.Candidates[j].Index })
	for i := range g.Candidates {
		cc.Choices = append(cc.Choices, choice(&g.Candidates[i], ids))
	}
	if len(cc.Choices) == 0 {
		if g.PromptFeedback == nil || g.PromptFeedback.BlockReason == "" {
			return nil, provider.ProtocolError(d.Provider, "a response with neither candidates nor a block reason", nil)
		}
		// The prompt itself was blocked: an answer that says so, not a 500.
		cc.Choices = []llm.Choice{{Message: llm.ResponseMessage{Role: llm.RoleAssistant}, FinishReason: llm.FinishContentFilter}}
	}
	if g.UsageMetadata != nil {
		cc.Usage = g.UsageMetadata.usage().Wire()
	}
	return llm.NewCompletion(cc)
}

// choice translates one candidate.
func choice(c *candidate, ids *callIDs) llm.Choice {
	m := llm.ResponseMessage{Role: llm.RoleAssistant}
	var text, reasoning strings.Builder
	hasText := false
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			if p.ThoughtSignature != "" && m.ReasoningSignature == "" {
				m.ReasoningSignature = p.ThoughtSignature
			}
			switch {
			case p.FunctionCall != nil:
				m.ToolCalls = append(m.ToolCalls, llm.ToolCallJSON{ID: ids.next(p.FunctionCall.ID), Type: "function",
					Function: llm.FunctionCall{Name: p.FunctionCall.Name, Arguments: arguments(p.FunctionCall.Args)}})
			case p.Text != nil && p.Thought:
				reasoning.WriteString(*p.Text)
			case p.Text != nil:
				text.WriteString(*p.Text)
				hasText = hasText || *p.Text != ""
			}
		}
	}
	if hasText || (len(m.ToolCalls) == 0 && c.Content != nil) {
		m.Content = llm.Str(text.String())
	}
	m.ReasoningContent = reasoning.String()
	return llm.Choice{Index: c.Index, Message: m, FinishReason: finishReason(c.FinishReason, len(m.ToolCalls) > 0)}
}

// arguments is a function call's args object as OpenAI's arguments text.
func arguments(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 || llm.KindOf(args) == llm.KindNull {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, args) != nil {
		return string(args)
	}
	return b.String()
}

// callIDs names the function calls of one response. Gemini does not give
// calls ids (OpenAI clients need them to match tool results), so they are
// made up: call_<response id>_<n>, stable for the whole response, streamed
// or not, and unique across the turns of a conversation, which call_<n>
// alone would not be.
type callIDs struct {
	prefix string
	n      int
}

func newCallIDs(responseID string) *callIDs {
	if responseID == "" {
		responseID = randomID()
	}
	return &callIDs{prefix: "call_" + responseID + "_"}
}

// next returns the id for the next call, keeping one Gemini sent.
func (c *callIDs) next(given string) string {
	c.n++
	if given != "" {
		return given
	}
	return c.prefix + strconv.Itoa(c.n-1)
}

func completionID(responseID string) string {
	if responseID == "" {
		responseID = randomID()
	}
	return "chatcmpl-" + responseID
}

func randomID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [22]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

func modelName(g *generateResponse, d *provider.Deployment) string {
	if g.ModelVersion != "" {
		return g.ModelVersion
	}
	return strings.TrimPrefix(d.Model, "models/")
}
