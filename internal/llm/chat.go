package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ChatParams is a chat completion request fully decoded, for adapters that
// translate it into another provider's API and for inbound dialects (the
// Anthropic Messages API) that translate into it. The OpenAI adapter never
// needs it: it forwards the client's bytes.
//
// It follows OpenAI's request shape; fields the gateway does not model are
// kept in Other so an adapter can refuse them (or drop them when the
// provider is configured with drop_unsupported).
type ChatParams struct {
	Model             string
	Messages          []Message
	Tools             []Tool
	ToolChoice        *ToolChoice
	ParallelToolCalls *bool
	ResponseFormat    *ResponseFormat
	Stop              []string
	Temperature       *float64
	TopP              *float64
	// MaxTokens is max_completion_tokens, else max_tokens; 0 when absent.
	MaxTokens int
	// ReasoningEffort is OpenAI's reasoning_effort: minimal, low, medium
	// or high ("" when absent).
	ReasoningEffort string
	// ThinkingBudget is a reasoning budget in tokens, set by dialects that
	// speak in budgets (Anthropic's thinking.budget_tokens); 0 when absent.
	// It is not an OpenAI field: encoded for OpenAI it becomes the nearest
	// reasoning_effort, and translating adapters prefer it to the effort.
	ThinkingBudget   int
	User             string
	N                *int
	Seed             *int64
	PresencePenalty  *float64
	FrequencyPenalty *float64
	Logprobs         bool
	TopLogprobs      *int
	Stream           bool
	IncludeUsage     bool
	// Metadata is OpenAI's metadata object (string values), kept for
	// providers that accept request metadata.
	Metadata map[string]string
	// Other holds the top-level fields not modelled above, raw.
	Other map[string]json.RawMessage
}

// Roles of a chat message.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of the conversation.
type Message struct {
	Role string
	// Content is nil for a null or absent content (an assistant turn that
	// only calls tools); a plain string becomes one text part.
	Content    []Part
	Name       string
	ToolCalls  []ToolCall // assistant turns
	ToolCallID string     // tool turns: the call this result answers
	Refusal    string     // assistant turns
	// Reasoning is the visible reasoning of an earlier assistant turn
	// ("reasoning_content" on the wire, as DeepSeek and vLLM send it);
	// ReasoningSignature is the provider's opaque proof of it (Anthropic
	// thinking signatures), needed to hand it back in tool-use loops.
	Reasoning          string
	ReasoningSignature string
}

// Part types.
const (
	PartText     = "text"
	PartImageURL = "image_url"
	PartAudio    = "input_audio"
	PartFile     = "file"
)

// Part is one piece of message content.
type Part struct {
	Type string
	Text string // PartText
	// ImageURL is an http(s) URL or a data: URL (PartImageURL);
	// ImageDetail is OpenAI's "detail" hint.
	ImageURL    string
	ImageDetail string
	// Raw is the part as the client sent it, for types the gateway does
	// not model (audio, files); adapters that cannot carry it refuse it.
	Raw json.RawMessage
	// CacheControl is Anthropic's cache_control marker, raw, kept when an
	// Anthropic-dialect request is routed to Anthropic.
	CacheControl json.RawMessage
}

// TextContent joins the text parts of m, for providers whose turns are
// plain strings.
func (m *Message) TextContent() string {
	if len(m.Content) == 1 && m.Content[0].Type == PartText {
		return m.Content[0].Text
	}
	var b strings.Builder
	for _, p := range m.Content {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, raw; nil when the
	// function takes none.
	Parameters json.RawMessage
	Strict     *bool
	// CacheControl is Anthropic's cache_control marker on the definition,
	// raw: a prompt-cache breakpoint after the tools, kept when the
	// request goes to Anthropic.
	CacheControl json.RawMessage
}

// ToolCall is a function call made by the model.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, exactly as the model produced it
}

// Tool choice modes.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function" // Name says which
)

// ToolChoice says whether and which tool the model must call.
type ToolChoice struct {
	Mode string
	Name string // for ToolChoiceFunction
}

// Response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// ResponseFormat is OpenAI's response_format.
type ResponseFormat struct {
	Type        string
	Name        string          // json_schema.name
	Description string          // json_schema.description
	Schema      json.RawMessage // json_schema.schema
	Strict      *bool           // json_schema.strict
}

// Finish reasons, in OpenAI's vocabulary. Providers' reasons map onto
// these; a reason that has no faithful equivalent keeps a distinct value
// (FinishMalformedToolCall, FinishError) rather than pretending to be stop.
const (
	FinishStop              = "stop"
	FinishLength            = "length"
	FinishToolCalls         = "tool_calls"
	FinishContentFilter     = "content_filter"
	FinishMalformedToolCall = "malformed_tool_call"
	FinishError             = "error"
)

// DecodeChatParams decodes an OpenAI chat completion request body. Errors
// are OpenAI-style 400s naming the parameter.
func DecodeChatParams(body []byte) (*ChatParams, error) {
	p := &ChatParams{}
	var maxTokens, maxCompletion int
	var ferr *Error
	err := EachField(body, func(key string, v []byte, _ int) bool {
		ferr = p.field(key, v, &maxTokens, &maxCompletion)
		return ferr == nil
	})
	if err != nil {
		return nil, jsonError(err)
	}
	if ferr != nil {
		return nil, ferr
	}
	p.MaxTokens = maxCompletion
	if p.MaxTokens == 0 {
		p.MaxTokens = maxTokens
	}
	return p, nil
}

// Params decodes the whole request once and caches it. Adapters that
// translate call it; pass-through adapters never pay for it.
func (r *ChatRequest) Params() (*ChatParams, error) {
	if r.params == nil {
		p, err := DecodeChatParams(r.Body)
		if err != nil {
			return nil, err
		}
		r.params = p
	}
	return r.params, nil
}

// NewChatRequest builds a request from decoded params, as an inbound
// dialect does after translating its own request shape: the OpenAI body
// is encoded from p, and Params returns p itself.
func NewChatRequest(p *ChatParams) (*ChatRequest, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	r, err := ParseChatRequest(body)
	if err != nil {
		return nil, err
	}
	r.params = p
	r.translated = true
	return r, nil
}

func (p *ChatParams) field(key string, v []byte, maxTokens, maxCompletion *int) *Error {
	null := KindOf(v) == KindNull
	var err error
	switch key {
	case "model":
		err = decodeField(v, &p.Model)
	case "messages":
		var ms []wireMessage
		if err = decodeField(v, &ms); err == nil {
			p.Messages = make([]Message, len(ms))
			for i := range ms {
				if e := ms[i].canonical(&p.Messages[i], i); e != nil {
					return e
				}
			}
		}
	case "tools":
		var ts []wireTool
		if err = decodeField(v, &ts); err == nil {
			p.Tools = make([]Tool, 0, len(ts))
			for i, t := range ts {
				if t.Type != "" && t.Type != "function" {
					return BadRequest(fmt.Sprintf("tools[%d].type", i), "invalid_value", "Invalid value for 'tools[%d].type': only \"function\" tools are supported.", i)
				}
				if t.Function.Name == "" {
					return missing(fmt.Sprintf("tools[%d].function.name", i))
				}
				p.Tools = append(p.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: NonNull(t.Function.Parameters), Strict: t.Function.Strict,
					CacheControl: NonNull(t.CacheControl)})
			}
		}
	case "tool_choice":
		p.ToolChoice = nil
		if !null {
			p.ToolChoice, err = decodeToolChoice(v)
			if err != nil {
				return BadRequest(key, "invalid_value", "Invalid value for 'tool_choice': %v.", err)
			}
		}
	case "parallel_tool_calls":
		p.ParallelToolCalls = nil
		err = decodeField(v, &p.ParallelToolCalls)
	case "response_format":
		p.ResponseFormat = nil
		if !null {
			var w wireResponseFormat
			if err = decodeField(v, &w); err == nil {
				p.ResponseFormat = &ResponseFormat{Type: w.Type}
				switch w.Type {
				case FormatText, FormatJSONObject:
				case FormatJSONSchema:
					if w.JSONSchema == nil || w.JSONSchema.Name == "" {
						return missing("response_format.json_schema.name")
					}
					p.ResponseFormat.Name = w.JSONSchema.Name
					p.ResponseFormat.Description = w.JSONSchema.Description
					p.ResponseFormat.Schema = NonNull(w.JSONSchema.Schema)
					p.ResponseFormat.Strict = w.JSONSchema.Strict
				default:
					return BadRequest("response_format.type", "invalid_value", "Invalid value for 'response_format.type': expected one of \"text\", \"json_object\" or \"json_schema\".")
				}
			}
		}
	case "stop":
		p.Stop = nil
		switch KindOf(v) {
		case KindString:
			var s string
			err = decodeField(v, &s)
			p.Stop = []string{s}
		default:
			err = decodeField(v, &p.Stop)
		}
	case "temperature":
		p.Temperature = nil
		err = decodeField(v, &p.Temperature)
	case "top_p":
		p.TopP = nil
		err = decodeField(v, &p.TopP)
	case "max_tokens":
		*maxTokens = 0
		err = decodeField(v, maxTokens)
	case "max_completion_tokens":
		*maxCompletion = 0
		err = decodeField(v, maxCompletion)
	case "reasoning_effort":
		p.ReasoningEffort = ""
		err = decodeField(v, &p.ReasoningEffort)
	case "user":
		p.User = ""
		err = decodeField(v, &p.User)
	case "n":
		p.N = nil
		err = decodeField(v, &p.N)
	case "seed":
		p.Seed = nil
		err = decodeField(v, &p.Seed)
	case "presence_penalty":
		p.PresencePenalty = nil
		err = decodeField(v, &p.PresencePenalty)
	case "frequency_penalty":
		p.FrequencyPenalty = nil
		err = decodeField(v, &p.FrequencyPenalty)
	case "logprobs":
		p.Logprobs = false
		err = decodeField(v, &p.Logprobs)
	case "top_logprobs":
		p.TopLogprobs = nil
		err = decodeField(v, &p.TopLogprobs)
	case "stream":
		p.Stream = false
		err = decodeField(v, &p.Stream)
	case "stream_options":
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		err = decodeField(v, &so)
		p.IncludeUsage = so.IncludeUsage
	case "metadata":
		p.Metadata = nil
		err = decodeField(v, &p.Metadata)
	default:
		if p.Other == nil {
			p.Other = map[string]json.RawMessage{}
		}
		p.Other[key] = json.RawMessage(bytes.Clone(v))
	}
	if err != nil {
		return BadRequest(key, "invalid_type", "Invalid type for '%s': %v.", key, typeErrorText(err))
	}
	return nil
}

// decodeField decodes one member; null leaves the zero value.
func decodeField(v []byte, dst any) error {
	if KindOf(v) == KindNull {
		return nil
	}
	return json.Unmarshal(v, dst)
}

// typeErrorText turns encoding/json's error into words for a client.
func typeErrorText(err error) string {
	var te *json.UnmarshalTypeError
	if ok := asType(err, &te); ok {
		if te.Field != "" {
			return fmt.Sprintf("field %s: expected %s, got %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("expected %s, got %s", jsonTypeName(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func jsonTypeName(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr", "interface":
		return "a value"
	}
	return "a number"
}

func asType(err error, te **json.UnmarshalTypeError) bool {
	for err != nil {
		if t, ok := err.(*json.UnmarshalTypeError); ok {
			*te = t
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// NonNull is raw, or nil when raw is absent or JSON null: an optional
// field a client sent as null is treated as not sent.
func NonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || KindOf(raw) == KindNull {
		return nil
	}
	return raw
}

func decodeToolChoice(v []byte) (*ToolChoice, error) {
	if KindOf(v) == KindString {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		switch s {
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
			return &ToolChoice{Mode: s}, nil
		}
		return nil, fmt.Errorf("expected \"auto\", \"none\", \"required\" or a function, got %q", s)
	}
	var w struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(v, &w); err != nil {
		return nil, err
	}
	if w.Type != "function" || w.Function.Name == "" {
		return nil, fmt.Errorf("expected {\"type\":\"function\",\"function\":{\"name\":…}}")
	}
	return &ToolChoice{Mode: ToolChoiceFunction, Name: w.Function.Name}, nil
}
