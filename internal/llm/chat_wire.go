package llm

import (
	"encoding/json"
	"strconv"
)

// This file holds OpenAI's wire shapes for the typed chat model: decoding
// messages, tools and formats, and encoding ChatParams back into a body.

type wireMessage struct {
	Role               string          `json:"role"`
	Content            json.RawMessage `json:"content"`
	Name               string          `json:"name"`
	ToolCalls          []ToolCallJSON  `json:"tool_calls"`
	ToolCallID         string          `json:"tool_call_id"`
	Refusal            string          `json:"refusal"`
	ReasoningContent   string          `json:"reasoning_content"`
	ReasoningSignature string          `json:"reasoning_signature"`
	FunctionCall       json.RawMessage `json:"function_call"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type wireResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// canonical converts message i into m, checking what OpenAI checks.
func (w *wireMessage) canonical(m *Message, i int) *Error {
	at := func(f string) string { return "messages[" + strconv.Itoa(i) + "]." + f }
	switch w.Role {
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
	case "function":
		return BadRequest(at("role"), "invalid_value", "Invalid value for '%s': the deprecated \"function\" role is not supported; use \"tool\".", at("role"))
	default:
		return BadRequest(at("role"), "invalid_value", "Invalid value for '%s': expected one of system, developer, user, assistant or tool, got %q.", at("role"), w.Role)
	}
	*m = Message{Role: w.Role, Name: w.Name, ToolCallID: w.ToolCallID, Refusal: w.Refusal, Reasoning: w.ReasoningContent, ReasoningSignature: w.ReasoningSignature}
	switch KindOf(w.Content) {
	case KindNull, KindInvalid:
		if w.Role != RoleAssistant {
			return missing(at("content"))
		}
	case KindString:
		var s string
		if err := json.Unmarshal(w.Content, &s); err != nil {
			return wrongType(at("content"), "a string or an array", KindString)
		}
		m.Content = []Part{{Type: PartText, Text: s}}
	case KindArray:
		var raws []json.RawMessage
		if err := json.Unmarshal(w.Content, &raws); err != nil {
			return wrongType(at("content"), "an array of content parts", KindArray)
		}
		m.Content = make([]Part, 0, len(raws))
		for j, raw := range raws {
			var wp wirePart
			pat := at("content[" + strconv.Itoa(j) + "]")
			if KindOf(raw) != KindObject || json.Unmarshal(raw, &wp) != nil {
				return wrongType(pat, "a content part object", KindOf(raw))
			}
			p := Part{Type: wp.Type, CacheControl: NonNull(wp.CacheControl)}
			switch wp.Type {
			case PartText:
				p.Text = wp.Text
			case PartImageURL:
				if wp.ImageURL == nil || wp.ImageURL.URL == "" {
					return missing(pat + ".image_url.url")
				}
				p.ImageURL, p.ImageDetail = wp.ImageURL.URL, wp.ImageURL.Detail
			case PartAudio, PartFile, "refusal":
				p.Raw = raw
			default:
				return BadRequest(pat+".type", "invalid_value", "Invalid value for '%s.type': unsupported content part type %q.", pat, wp.Type)
			}
			m.Content = append(m.Content, p)
		}
	default:
		return wrongType(at("content"), "a string or an array", KindOf(w.Content))
	}
	if len(w.FunctionCall) > 0 && KindOf(w.FunctionCall) != KindNull {
		return BadRequest(at("function_call"), "invalid_value", "Invalid '%s': the deprecated function_call is not supported; use tool_calls.", at("function_call"))
	}
	if w.Role == RoleTool && w.ToolCallID == "" {
		return missing(at("tool_call_id"))
	}
	for j, tc := range w.ToolCalls {
		if tc.Function.Name == "" {
			return missing(at("tool_calls[" + strconv.Itoa(j) + "].function.name"))
		}
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return nil
}

// MarshalJSON encodes p as an OpenAI chat completion request body.
func (p *ChatParams) MarshalJSON() ([]byte, error) {
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	type tool struct {
		Type         string          `json:"type"`
		Function     fn              `json:"function"`
		CacheControl json.RawMessage `json:"cache_control,omitempty"`
	}
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	out := struct {
		Model             string            `json:"model"`
		Messages          []outMessage      `json:"messages"`
		Tools             []tool            `json:"tools,omitempty"`
		ToolChoice        any               `json:"tool_choice,omitempty"`
		ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
		ResponseFormat    any               `json:"response_format,omitempty"`
		Stop              []string          `json:"stop,omitempty"`
		Temperature       *float64          `json:"temperature,omitempty"`
		TopP              *float64          `json:"top_p,omitempty"`
		MaxTokens         int               `json:"max_completion_tokens,omitempty"`
		ReasoningEffort   string            `json:"reasoning_effort,omitempty"`
		User              string            `json:"user,omitempty"`
		N                 *int              `json:"n,omitempty"`
		Seed              *int64            `json:"seed,omitempty"`
		PresencePenalty   *float64          `json:"presence_penalty,omitempty"`
		FrequencyPenalty  *float64          `json:"frequency_penalty,omitempty"`
		Logprobs          bool              `json:"logprobs,omitempty"`
		TopLogprobs       *int              `json:"top_logprobs,omitempty"`
		Stream            bool              `json:"stream,omitempty"`
		StreamOptions     *streamOptions    `json:"stream_options,omitempty"`
		Metadata          map[string]string `json:"metadata,omitempty"`
	}{
		Model: p.Model, ParallelToolCalls: p.ParallelToolCalls, Stop: p.Stop,
		Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxTokens,
		ReasoningEffort: p.ReasoningEffort, User: p.User,
		N: p.N, Seed: p.Seed, PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty,
		Logprobs: p.Logprobs, TopLogprobs: p.TopLogprobs, Stream: p.Stream, Metadata: p.Metadata,
	}
	if out.ReasoningEffort == "" && p.ThinkingBudget > 0 {
		out.ReasoningEffort = EffortForBudget(p.ThinkingBudget)
	}
	out.Messages = make([]outMessage, len(p.Messages))
	for i := range p.Messages {
		out.Messages[i] = encodeMessage(&p.Messages[i])
	}
	for _, t := range p.Tools {
		out.Tools = append(out.Tools, tool{Type: "function", Function: fn{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict},
			CacheControl: t.CacheControl})
	}
	if tc := p.ToolChoice; tc != nil {
		if tc.Mode == ToolChoiceFunction {
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		} else {
			out.ToolChoice = tc.Mode
		}
	}
	if rf := p.ResponseFormat; rf != nil {
		f := map[string]any{"type": rf.Type}
		if rf.Type == FormatJSONSchema {
			js := map[string]any{"name": rf.Name}
			if rf.Description != "" {
				js["description"] = rf.Description
			}
			if rf.Schema != nil {
				js["schema"] = rf.Schema
			}
			if rf.Strict != nil {
				js["strict"] = *rf.Strict
			}
			f["json_schema"] = js
		}
		out.ResponseFormat = f
	}
	if p.Stream && p.IncludeUsage {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(out)
	if err != nil || len(p.Other) == 0 {
		return body, err
	}
	// Unmodelled fields go back as they came.
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(body, &extra); err != nil {
		return nil, err
	}
	for k, v := range p.Other {
		if _, ok := extra[k]; !ok {
			extra[k] = v
		}
	}
	return json.Marshal(extra)
}

type outMessage struct {
	Role               string         `json:"role"`
	Content            any            `json:"content"`
	Name               string         `json:"name,omitempty"`
	ToolCalls          []ToolCallJSON `json:"tool_calls,omitempty"`
	ToolCallID         string         `json:"tool_call_id,omitempty"`
	Refusal            string         `json:"refusal,omitempty"`
	ReasoningContent   string         `json:"reasoning_content,omitempty"`
	ReasoningSignature string         `json:"reasoning_signature,omitempty"`
}

func encodeMessage(m *Message) outMessage {
	o := outMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, Refusal: m.Refusal, ReasoningContent: m.Reasoning, ReasoningSignature: m.ReasoningSignature}
	switch {
	case m.Content == nil:
		o.Content = nil
	case len(m.Content) == 1 && m.Content[0].Type == PartText && m.Content[0].CacheControl == nil:
		o.Content = m.Content[0].Text
	default:
		parts := make([]any, 0, len(m.Content))
		for _, p := range m.Content {
			parts = append(parts, encodePart(p))
		}
		o.Content = parts
	}
	for _, tc := range m.ToolCalls {
		o.ToolCalls = append(o.ToolCalls, ToolCallJSON{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return o
}

func encodePart(p Part) any {
	if p.Raw != nil {
		return p.Raw
	}
	out := map[string]any{"type": p.Type}
	switch p.Type {
	case PartText:
		out["text"] = p.Text
	case PartImageURL:
		img := map[string]string{"url": p.ImageURL}
		if p.ImageDetail != "" {
			img["detail"] = p.ImageDetail
		}
		out["image_url"] = img
	}
	if p.CacheControl != nil {
		out["cache_control"] = p.CacheControl
	}
	return out
}

// EffortForBudget maps a thinking budget in tokens onto OpenAI's
// reasoning_effort levels.
func EffortForBudget(tokens int) string {
	switch {
	case tokens <= 0:
		return ""
	case tokens <= 2048:
		return "low"
	case tokens <= 12288:
		return "medium"
	}
	return "high"
}

// BudgetForEffort maps OpenAI's reasoning_effort onto a thinking budget in
// tokens, for providers that take budgets (Anthropic, Gemini).
func BudgetForEffort(effort string) int {
	switch effort {
	case "minimal":
		return 1024
	case "low":
		return 2048
	case "medium":
		return 8192
	case "high":
		return 24576
	}
	return 0
}

// DataURL splits a data: URL into its media type and base64 payload.
func DataURL(u string) (mediaType, data string, ok bool) {
	const prefix = "data:"
	if len(u) < len(prefix) || u[:len(prefix)] != prefix {
		return "", "", false
	}
	rest := u[len(prefix):]
	for i := 0; i+7 <= len(rest); i++ {
		if rest[i:i+7] == ";base64" && i+8 <= len(rest) && rest[i+7] == ',' {
			return rest[:i], rest[i+8:], true
		}
	}
	return "", "", false
}
