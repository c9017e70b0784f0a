package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// DefaultMaxTokens is the max_tokens sent when the client gave none:
// Anthropic requires the field, OpenAI does not. With extended thinking
// the thinking budget is added on top, so the answer keeps this much room.
const DefaultMaxTokens = 4096

// minThinkingBudget is the smallest budget_tokens Anthropic accepts.
const minThinkingBudget = 1024

// jsonObjectTool names the tool that carries a response_format
// json_object answer (json_schema answers use the schema's name).
const jsonObjectTool = "json_response"

// The Messages request, in Anthropic's field order.
type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        []block         `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          json.RawMessage `json:"top_k,omitempty"`
	Thinking      *thinking       `json:"thinking,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is any content block; each type fills its own fields. Text is a
// pointer so a text block always carries "text" and no other type does.
type block struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text,omitempty"`
	Source       *source         `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      []block         `json:"content,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type source struct {
	Type      string `json:"type"` // base64 | url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"` // auto | any | tool | none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

func encodeRequest(mr *messagesRequest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // prompts are sent as written
	if err := enc.Encode(mr); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// translate builds the Messages request for p. It refuses, with a 400
// naming the parameter, what Anthropic cannot honour: n > 1, logprobs,
// top_logprobs, non-zero presence/frequency penalties, seed, OpenAI
// metadata, temperature above 1, and any unmodelled field except top_k
// and safety_identifier. With d.DropUnsupported those are dropped instead.
// Content it cannot carry (audio, files other than PDF data) is always
// refused: dropping part of a prompt would change the question.
func translate(d *provider.Deployment, p *llm.ChatParams) (*messagesRequest, error) {
	mr := &messagesRequest{Model: d.Model, Stream: p.Stream, StopSequences: p.Stop, TopP: p.TopP, Temperature: p.Temperature}
	if err := unsupported(d, p, mr); err != nil {
		return nil, err
	}
	system, msgs, err := convertMessages(d, p.Messages)
	if err != nil {
		return nil, err
	}
	mr.System, mr.Messages = system, msgs

	budget, err := thinkingBudget(p)
	if err != nil {
		return nil, err
	}
	mr.MaxTokens = p.MaxTokens
	if mr.MaxTokens == 0 {
		mr.MaxTokens = DefaultMaxTokens + budget
	}
	if budget > 0 {
		if err := enableThinking(d, p, mr, budget); err != nil {
			return nil, err
		}
	}
	if err := convertTools(d, p, mr); err != nil {
		return nil, err
	}
	return mr, nil
}

// refuse is the 400 for a parameter Anthropic cannot honour, or nil when
// the deployment is configured to drop such parameters.
func refuse(d *provider.Deployment, param string) *llm.Error {
	if d.DropUnsupported {
		return nil
	}
	return provider.Unsupported(d, param)
}

func unsupported(d *provider.Deployment, p *llm.ChatParams, mr *messagesRequest) *llm.Error {
	type check struct {
		param string
		bad   bool
	}
	for _, c := range []check{
		{"n", p.N != nil && *p.N != 1},
		{"logprobs", p.Logprobs},
		{"top_logprobs", p.TopLogprobs != nil},
		{"presence_penalty", p.PresencePenalty != nil && *p.PresencePenalty != 0},
		{"frequency_penalty", p.FrequencyPenalty != nil && *p.FrequencyPenalty != 0},
		{"seed", p.Seed != nil},
		{"metadata", len(p.Metadata) > 0},
	} {
		if c.bad {
			if e := refuse(d, c.param); e != nil {
				return e
			}
		}
	}
	if t := p.Temperature; t != nil && (*t < 0 || *t > 1) {
		if !d.DropUnsupported {
			return llm.BadRequest("temperature", "unsupported_value",
				"Unsupported value: 'temperature' must be between 0 and 1 for provider %q (type %s), got %v.", d.Provider, d.Type, *t)
		}
		mr.Temperature = nil
	}
	user := p.User
	keys := make([]string, 0, len(p.Other))
	for k := range p.Other {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first refused field is the same every time
	for _, k := range keys {
		v := p.Other[k]
		if llm.KindOf(v) == llm.KindNull {
			continue
		}
		switch k {
		case "top_k": // not OpenAI's, but sent by clients of vLLM-style servers; Anthropic has it
			if llm.KindOf(v) != llm.KindNumber {
				return llm.BadRequest(k, "invalid_type", "Invalid type for 'top_k': expected an integer.")
			}
			mr.TopK = v
		case "safety_identifier": // OpenAI's successor of user
			if user == "" {
				user, _ = llm.UnquoteString(v)
			}
		default:
			if e := refuse(d, k); e != nil {
				return e
			}
		}
	}
	if user != "" {
		mr.Metadata = &metadata{UserID: user}
	}
	return nil
}

// thinkingBudget is the extended-thinking budget p asks for: Anthropic's
// own budget when the request came in Anthropic's dialect, else the
// reasoning_effort mapped to tokens. 0 means no thinking.
func thinkingBudget(p *llm.ChatParams) (int, *llm.Error) {
	if p.ThinkingBudget > 0 {
		return p.ThinkingBudget, nil
	}
	switch p.ReasoningEffort {
	case "", "none":
		return 0, nil
	}
	if b := llm.BudgetForEffort(p.ReasoningEffort); b > 0 {
		return b, nil
	}
	return 0, llm.BadRequest("reasoning_effort", "invalid_value",
		"Invalid value for 'reasoning_effort': expected one of none, minimal, low, medium or high, got %q.", p.ReasoningEffort)
}

// enableThinking turns on extended thinking within Anthropic's rules: the
// budget is at least 1024 and below max_tokens (a client's max_tokens
// bounds reasoning and answer together, as OpenAI's does), sampling
// settings other than temperature 1 and top_p ≥ 0.95 are refused, and so
// is a tool_choice that forces a tool.
func enableThinking(d *provider.Deployment, p *llm.ChatParams, mr *messagesRequest, budget int) *llm.Error {
	budget = max(budget, minThinkingBudget)
	if budget >= mr.MaxTokens {
		budget = mr.MaxTokens - 1
	}
	if budget < minThinkingBudget {
		return llm.BadRequest("max_tokens", "invalid_value",
			"Invalid value for 'max_tokens': provider %q (type %s) needs more than %d tokens to think (reasoning_effort); raise max_tokens or drop reasoning_effort.",
			d.Provider, d.Type, minThinkingBudget)
	}
	mr.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
	if t := mr.Temperature; t != nil && *t != 1 {
		if e := refuse(d, "temperature"); e != nil {
			return withThinking(e)
		}
		mr.Temperature = nil
	}
	if tp := mr.TopP; tp != nil && *tp < 0.95 {
		if e := refuse(d, "top_p"); e != nil {
			return withThinking(e)
		}
		mr.TopP = nil
	}
	if mr.TopK != nil {
		if e := refuse(d, "top_k"); e != nil {
			return withThinking(e)
		}
		mr.TopK = nil
	}
	return nil
}

func withThinking(e *llm.Error) *llm.Error {
	e.Message += " Anthropic does not allow it together with extended thinking (reasoning_effort)."
	return e
}

// jsonToolName is the tool that carries a response_format answer, or ""
// when there is none: no JSON format asked, a tool_choice that forces a
// function call (the answer is that call, as with OpenAI), or extended
// thinking (Anthropic cannot force a tool while thinking). The response
// side calls it too, to recognise the tool's input as the content.
func jsonToolName(p *llm.ChatParams) string {
	rf := p.ResponseFormat
	if rf == nil || (rf.Type != llm.FormatJSONObject && rf.Type != llm.FormatJSONSchema) {
		return ""
	}
	if tc := p.ToolChoice; tc != nil && (tc.Mode == llm.ToolChoiceRequired || tc.Mode == llm.ToolChoiceFunction) {
		return ""
	}
	if b, _ := thinkingBudget(p); b > 0 {
		return ""
	}
	if rf.Type == llm.FormatJSONSchema {
		return rf.Name
	}
	return jsonObjectTool
}

// convertTools sets tools and tool_choice. response_format json_object and
// json_schema have no Messages API field, so they become a tool whose
// input_schema is the schema, which the model is made to call: its input
// is the JSON answer, returned to the client as the message content.
func convertTools(d *provider.Deployment, p *llm.ChatParams, mr *messagesRequest) *llm.Error {
	for _, t := range p.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(provider.EmptySchema)
		}
		mr.Tools = append(mr.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema, CacheControl: t.CacheControl})
	}
	var tc *toolChoice
	if c := p.ToolChoice; c != nil && len(p.Tools) > 0 {
		switch c.Mode {
		case llm.ToolChoiceAuto:
			tc = &toolChoice{Type: "auto"}
		case llm.ToolChoiceNone:
			tc = &toolChoice{Type: "none"}
		case llm.ToolChoiceRequired:
			tc = &toolChoice{Type: "any"}
		case llm.ToolChoiceFunction:
			tc = &toolChoice{Type: "tool", Name: c.Name}
		}
		if tc != nil && mr.Thinking != nil && (tc.Type == "any" || tc.Type == "tool") {
			if e := refuse(d, "tool_choice"); e != nil {
				return withThinking(e)
			}
			tc = &toolChoice{Type: "auto"}
		}
	}
	if rf := p.ResponseFormat; rf != nil && rf.Type != llm.FormatText && mr.Thinking != nil {
		if e := refuse(d, "response_format"); e != nil {
			return withThinking(e)
		}
	}
	if name := jsonToolName(p); name != "" {
		for _, t := range p.Tools {
			if t.Name == name {
				return llm.BadRequest("response_format.json_schema.name", "invalid_value",
					"Invalid value for 'response_format.json_schema.name': %q is also the name of a tool; provider %q (type %s) carries JSON answers as a tool of that name.", name, d.Provider, d.Type)
			}
		}
		rf := p.ResponseFormat
		schema := rf.Schema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := rf.Description
		if desc == "" {
			desc = "Give your final answer by calling this tool: its input is the answer, as JSON."
		}
		mr.Tools = append(mr.Tools, tool{Name: name, Description: desc, InputSchema: schema})
		if len(p.Tools) == 0 || (tc != nil && tc.Type == "none") {
			tc = &toolChoice{Type: "tool", Name: name}
		} else {
			// The model may still call the client's tools, but every
			// answer it gives must go through the JSON tool.
			tc = &toolChoice{Type: "any"}
		}
	}
	if p.ParallelToolCalls != nil && !*p.ParallelToolCalls && len(mr.Tools) > 0 {
		if tc == nil {
			tc = &toolChoice{Type: "auto"}
		}
		if tc.Type != "none" {
			tc.DisableParallelToolUse = true
		}
	}
	mr.ToolChoice = tc
	return nil
}

// convertMessages hoists system and developer messages into system, turns
// tool results into user turns of tool_result blocks and assistant tool
// calls into tool_use blocks, and merges consecutive turns of one role, as
// Anthropic requires alternating user and assistant turns.
func convertMessages(d *provider.Deployment, in []llm.Message) ([]block, []message, *llm.Error) {
	var system []block
	var out []message
	for i := range in {
		m := &in[i]
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			for j, part := range m.Content {
				if part.Type != llm.PartText {
					return nil, nil, llm.BadRequest(fmt.Sprintf("%s.content[%d]", at, j), "invalid_value",
						"Invalid content in '%s': provider %q (type %s) accepts only text in system and developer messages.", at, d.Provider, d.Type)
				}
				if part.Text != "" {
					system = append(system, textBlock(part.Text, part.CacheControl))
				}
			}
		case llm.RoleUser:
			blocks, err := userBlocks(d, m.Content, at)
			if err != nil {
				return nil, nil, err
			}
			out = appendTurn(out, "user", blocks)
		case llm.RoleAssistant:
			blocks, err := assistantBlocks(m, at)
			if err != nil {
				return nil, nil, err
			}
			if len(blocks) > 0 {
				out = appendTurn(out, "assistant", blocks)
			}
		case llm.RoleTool:
			content, err := userBlocks(d, m.Content, at)
			if err != nil {
				return nil, nil, err
			}
			out = appendTurn(out, "user", []block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content}})
		}
	}
	if len(out) == 0 {
		return nil, nil, llm.BadRequest("messages", "invalid_value",
			"Invalid 'messages': provider %q (type %s) needs at least one user message besides system messages.", d.Provider, d.Type)
	}
	if out[0].Role != "user" {
		return nil, nil, llm.BadRequest("messages", "invalid_value",
			"Invalid 'messages': provider %q (type %s) needs the conversation to start with a user message (after any system messages).", d.Provider, d.Type)
	}
	return system, out, nil
}

// appendTurn adds blocks as a turn of role, merged into the previous turn
// when it has the same role. Tool results go before anything else in a
// user turn, where Anthropic expects them.
func appendTurn(out []message, role string, blocks []block) []message {
	if n := len(out); n > 0 && out[n-1].Role == role {
		last := &out[n-1]
		if len(blocks) == 1 && blocks[0].Type == "tool_result" {
			at := 0
			for at < len(last.Content) && last.Content[at].Type == "tool_result" {
				at++
			}
			last.Content = append(last.Content[:at], append([]block{blocks[0]}, last.Content[at:]...)...)
			return out
		}
		last.Content = append(last.Content, blocks...)
		return out
	}
	return append(out, message{Role: role, Content: blocks})
}

func textBlock(text string, cache json.RawMessage) block {
	return block{Type: "text", Text: &text, CacheControl: cache}
}

// userBlocks converts user (and tool result) content. Empty text parts are
// skipped: Anthropic rejects empty text blocks.
func userBlocks(d *provider.Deployment, parts []llm.Part, at string) ([]block, *llm.Error) {
	blocks := make([]block, 0, len(parts))
	for j, part := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		switch part.Type {
		case llm.PartText:
			if part.Text != "" {
				blocks = append(blocks, textBlock(part.Text, part.CacheControl))
			}
		case llm.PartImageURL:
			src, err := imageSource(part.ImageURL, pat)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, block{Type: "image", Source: src, CacheControl: part.CacheControl})
		case llm.PartFile:
			b, err := documentBlock(d, part, pat)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		default:
			return nil, llm.BadRequest(pat+".type", "unsupported_value",
				"Unsupported content in '%s': provider %q (type %s) cannot take %q parts.", pat, d.Provider, d.Type, part.Type)
		}
	}
	return blocks, nil
}

// imageMediaTypes are the image types the Messages API accepts.
var imageMediaTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

func imageSource(u, pat string) (*source, *llm.Error) {
	if mt, data, ok := llm.DataURL(u); ok {
		if !imageMediaTypes[mt] {
			return nil, llm.BadRequest(pat+".image_url.url", "invalid_value",
				"Invalid image in '%s': media type %q is not one of image/jpeg, image/png, image/gif or image/webp.", pat, mt)
		}
		return &source{Type: "base64", MediaType: mt, Data: data}, nil
	}
	if len(u) > 8 && (u[:7] == "http://" || u[:8] == "https://") {
		return &source{Type: "url", URL: u}, nil
	}
	return nil, llm.BadRequest(pat+".image_url.url", "invalid_value",
		"Invalid image in '%s': expected an http(s) URL or a base64 data: URL.", pat)
}

// documentBlock carries an OpenAI file part holding a PDF as data as an
// Anthropic document block; file ids and other types have no equivalent.
func documentBlock(d *provider.Deployment, part llm.Part, pat string) (block, *llm.Error) {
	var w struct {
		File struct {
			FileData string `json:"file_data"`
		} `json:"file"`
	}
	_ = json.Unmarshal(part.Raw, &w)
	mt, data, ok := llm.DataURL(w.File.FileData)
	if !ok || mt != "application/pdf" {
		return block{}, llm.BadRequest(pat, "unsupported_value",
			"Unsupported content in '%s': provider %q (type %s) takes files only as PDF data (file.file_data as a data:application/pdf;base64 URL).", pat, d.Provider, d.Type)
	}
	return block{Type: "document", Source: &source{Type: "base64", MediaType: mt, Data: data}, CacheControl: part.CacheControl}, nil
}

// assistantBlocks converts an earlier assistant turn: its signed thinking
// first (Anthropic needs it back in tool-use loops), then text, then tool
// calls. Reasoning without a signature came from another provider and
// cannot be handed to Anthropic, so it is left out.
func assistantBlocks(m *llm.Message, at string) ([]block, *llm.Error) {
	var blocks []block
	if m.ReasoningSignature != "" {
		th := m.Reasoning
		blocks = append(blocks, block{Type: "thinking", Thinking: &th, Signature: m.ReasoningSignature})
	}
	for _, part := range m.Content {
		if part.Type == llm.PartText && part.Text != "" {
			blocks = append(blocks, textBlock(part.Text, part.CacheControl))
		}
	}
	for j, tc := range m.ToolCalls {
		input, err := toolInput(tc.Arguments)
		if err != nil {
			param := fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, j)
			return nil, llm.BadRequest(param, "invalid_value", "Invalid value for '%s': %v.", param, err)
		}
		blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
	}
	return blocks, nil
}

// toolInput parses a call's JSON arguments into Anthropic's input object.
func toolInput(args string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("the arguments are not valid JSON")
	}
	if llm.KindOf(trimmed) != llm.KindObject {
		return nil, fmt.Errorf("the arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
