package bedrock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// converseResponse is Converse's answer.
type converseResponse struct {
	Output struct {
		Message *struct {
			Role    string          `json:"role"`
			Content []responseBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string      `json:"stopReason"`
	Usage      *tokenUsage `json:"usage"`
	// Message is an exception's text: set when a 200 carries an error.
	Message string `json:"message"`
}

// responseBlock is a content block of an answer.
type responseBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ReasoningContent *struct {
		ReasoningText *reasoningText `json:"reasoningText"`
	} `json:"reasoningContent"`
}

// tokenUsage is Converse's usage. Cache reads and writes are counted
// apart from inputTokens; OpenAI's prompt_tokens includes them.
type tokenUsage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens"`
}

func (u *tokenUsage) wire() *llm.WireUsage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	return llm.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens,
		TotalTokens: prompt + u.OutputTokens, CachedTokens: u.CacheReadInputTokens}.Wire()
}

// finishReason maps Converse's stopReason onto OpenAI's vocabulary. A
// guardrail or content block is content_filter, a malformed tool call is
// malformed_tool_call; an unknown reason passes through as it is rather
// than pretending to be "stop".
func finishReason(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence":
		return llm.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "tool_use":
		return llm.FinishToolCalls
	case "guardrail_intervened", "content_filtered":
		return llm.FinishContentFilter
	case "malformed_model_output", "malformed_tool_use":
		return llm.FinishMalformedToolCall
	case "":
		return llm.FinishStop
	}
	return stop
}

// Completion translates a Converse answer into a chat.completion.
func (a *Adapter) Completion(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var cr converseResponse
	err = json.Unmarshal(body, &cr)
	if err == nil && cr.Output.Message == nil && cr.Message != "" {
		// An exception's {"message":…} under a 200: the provider's words
		// reach the client, as a 502 like any upstream failure.
		return nil, &llm.Error{Kind: llm.KindUpstreamStatus, Status: http.StatusBadGateway, Type: "server_error",
			Message: redact(cr.Message, a.token(d)), Cause: fmt.Errorf("provider %q: exception in a 200", d.Provider)}
	}
	if err != nil || cr.Output.Message == nil {
		return nil, provider.ProtocolError(d.Provider, "a Converse response without output.message", err)
	}
	msg := llm.ResponseMessage{Role: llm.RoleAssistant}
	var text bytes.Buffer
	hasText := false
	for _, b := range cr.Output.Message.Content {
		switch {
		case b.Text != nil:
			text.WriteString(*b.Text)
			hasText = true
		case b.ToolUse != nil:
			args := b.ToolUse.Input
			if len(args) == 0 || llm.KindOf(args) == llm.KindNull {
				args = json.RawMessage("{}")
			}
			var compact bytes.Buffer
			if json.Compact(&compact, args) != nil {
				return nil, provider.ProtocolError(d.Provider, "a toolUse block whose input is not JSON", nil)
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCallJSON{ID: b.ToolUse.ToolUseID, Type: "function",
				Function: llm.FunctionCall{Name: b.ToolUse.Name, Arguments: compact.String()}})
		case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
			msg.ReasoningContent += b.ReasoningContent.ReasoningText.Text
			msg.ReasoningSignature += b.ReasoningContent.ReasoningText.Signature
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = llm.Str(text.String())
	}
	cc := &llm.ChatCompletion{
		ID:      completionID(resp.Header),
		Created: time.Now().Unix(),
		Model:   d.Model,
		Choices: []llm.Choice{{Message: msg, FinishReason: finishReason(cr.StopReason)}},
	}
	if cr.Usage != nil {
		cc.Usage = cr.Usage.wire()
	}
	return llm.NewCompletion(cc)
}
