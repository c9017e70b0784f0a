package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// messageResponse is Anthropic's Message object (and message_start's).
type messageResponse struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	Content    []responseBlock `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      wireUsage       `json:"usage"`
	// Error is set when a 200 carries {"type":"error","error":{…}}.
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type responseBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

// wireUsage is Anthropic's usage. In message_delta every field may be
// absent or null; present ones replace what message_start said.
type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// merge overlays the fields u reports onto acc.
func (u *wireUsage) merge(acc *wireUsage) {
	for _, f := range []struct{ src, dst **int }{
		{&u.InputTokens, &acc.InputTokens},
		{&u.OutputTokens, &acc.OutputTokens},
		{&u.CacheCreationInputTokens, &acc.CacheCreationInputTokens},
		{&u.CacheReadInputTokens, &acc.CacheReadInputTokens},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// usage maps Anthropic's counts onto OpenAI's: Anthropic's input_tokens
// excludes the tokens read from or written to its prompt cache, OpenAI's
// prompt_tokens includes them (cached_tokens says how many were read).
// Thinking is part of output_tokens; Anthropic does not break it out.
func (u *wireUsage) usage() llm.Usage {
	n := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	out := llm.Usage{
		PromptTokens:     n(u.InputTokens) + n(u.CacheReadInputTokens) + n(u.CacheCreationInputTokens),
		CompletionTokens: n(u.OutputTokens),
		CachedTokens:     n(u.CacheReadInputTokens),
	}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	return out
}

// finishReason maps stop_reason. jsonOnly says the only tool the model
// called was the response_format tool, whose call is the answer itself.
// pause_turn (a long server-side turn paused for the client to resume)
// means the answer is unfinished, which is what "length" tells a client;
// a reason this code does not know is passed on rather than called stop.
func finishReason(stop string, jsonOnly bool) string {
	switch stop {
	case "end_turn", "stop_sequence", "":
		return llm.FinishStop
	case "max_tokens", "model_context_window_exceeded", "pause_turn":
		return llm.FinishLength
	case "tool_use":
		if jsonOnly {
			return llm.FinishStop
		}
		return llm.FinishToolCalls
	case "refusal":
		return llm.FinishContentFilter
	}
	return stop
}

// compactInput is a tool_use input as OpenAI argument text.
func compactInput(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || llm.KindOf(in) == llm.KindNull {
		return "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, in) != nil {
		return string(in)
	}
	return buf.String()
}

// Completion translates a Message into a chat.completion.
func (a Adapter) Completion(resp *http.Response, d *provider.Deployment, req *llm.ChatRequest) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var m messageResponse
	err = json.Unmarshal(body, &m)
	if err == nil && m.Type == "error" && m.Error != nil && m.Error.Message != "" {
		return nil, errorIn200(d, m.Error.Type, m.Error.Message)
	}
	if err != nil || m.Type != "message" {
		return nil, provider.ProtocolError(d.Provider, "a response that is not a Messages API message", err)
	}
	jsonTool := ""
	if p, err := req.Params(); err == nil {
		jsonTool = jsonToolName(p)
	}
	var text, reasoning strings.Builder
	var msg llm.ResponseMessage
	sawText, sawJSON := false, false
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			sawText = true
		case "tool_use":
			if jsonTool != "" && b.Name == jsonTool {
				text.WriteString(compactInput(b.Input))
				sawText, sawJSON = true, true
				continue
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCallJSON{ID: b.ID, Type: "function",
				Function: llm.FunctionCall{Name: b.Name, Arguments: compactInput(b.Input)}})
		case "thinking":
			reasoning.WriteString(b.Thinking)
			// One signature fits the OpenAI shape; the last block's is the
			// one a following tool-use turn is checked against.
			msg.ReasoningSignature = b.Signature
		}
	}
	if sawText || len(msg.ToolCalls) == 0 {
		msg.Content = llm.Str(text.String())
	}
	msg.ReasoningContent = reasoning.String()
	u := m.Usage.usage()
	c := &llm.ChatCompletion{
		ID: m.ID, Created: a.now().Unix(), Model: m.Model,
		Choices: []llm.Choice{{Message: msg, FinishReason: finishReason(m.StopReason, sawJSON && len(msg.ToolCalls) == 0)}},
		Usage:   u.Wire(),
	}
	return llm.NewCompletion(c)
}
