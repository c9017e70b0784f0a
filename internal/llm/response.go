package llm

import (
	"bytes"
	"encoding/json"
)

// The types below are OpenAI's response shapes with their JSON tags. They
// serve both directions: translating adapters build them and encode them
// for the client; inbound dialects (Anthropic Messages) decode them from
// whatever backend answered and re-express them.

// ChatCompletion is OpenAI's chat.completion object.
type ChatCompletion struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"` // "chat.completion"
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	Choices           []Choice   `json:"choices"`
	Usage             *WireUsage `json:"usage,omitempty"`
	SystemFingerprint string     `json:"system_fingerprint,omitempty"`
}

// Choice is one alternative of a chat.completion.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"` // null unless the provider gave some
}

// ResponseMessage is the assistant message of a Choice.
type ResponseMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []ToolCallJSON `json:"tool_calls,omitempty"`
	// ReasoningContent carries visible reasoning (thinking) the way
	// DeepSeek and vLLM do; OpenAI clients ignore it.
	ReasoningContent   string `json:"reasoning_content,omitempty"`
	ReasoningSignature string `json:"reasoning_signature,omitempty"`
}

// ToolCallJSON is a tool call in a response message.
type ToolCallJSON struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON arguments as text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatChunk is OpenAI's chat.completion.chunk object.
type ChatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"` // "chat.completion.chunk"
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *WireUsage    `json:"usage,omitempty"`
}

// ChunkChoice is one alternative's delta in a chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
}

// Delta is what a chunk adds to the message.
type Delta struct {
	Role               string          `json:"role,omitempty"`
	Content            *string         `json:"content,omitempty"`
	Refusal            *string         `json:"refusal,omitempty"`
	ReasoningContent   string          `json:"reasoning_content,omitempty"`
	ReasoningSignature string          `json:"reasoning_signature,omitempty"`
	ToolCalls          []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a piece of a streamed tool call: the first piece of a
// call has its ID, type and name; later pieces add argument text. Index
// says which call of the message a piece belongs to.
type ToolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function FunctionCallDelta `json:"function"`
}

// FunctionCallDelta is the function part of a ToolCallDelta.
type FunctionCallDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// WireUsage is OpenAI's usage object.
type WireUsage struct {
	PromptTokens            int                      `json:"prompt_tokens"`
	CompletionTokens        int                      `json:"completion_tokens"`
	TotalTokens             int                      `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails breaks prompt tokens down.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionTokensDetails breaks completion tokens down.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// Wire returns u in OpenAI's shape, with the details objects present
// (OpenAI always sends them on current models).
func (u Usage) Wire() *WireUsage {
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return &WireUsage{
		PromptTokens:            u.PromptTokens,
		CompletionTokens:        u.CompletionTokens,
		TotalTokens:             total,
		PromptTokensDetails:     &PromptTokensDetails{CachedTokens: u.CachedTokens},
		CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: u.ReasoningTokens},
	}
}

// Usage returns w as a Usage.
func (w *WireUsage) Usage() Usage {
	u := Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens, TotalTokens: w.TotalTokens}
	if w.PromptTokensDetails != nil {
		u.CachedTokens = w.PromptTokensDetails.CachedTokens
	}
	if w.CompletionTokensDetails != nil {
		u.ReasoningTokens = w.CompletionTokensDetails.ReasoningTokens
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// Str returns a pointer to s, for the optional string fields above.
func Str(s string) *string { return &s }

// NewCompletion encodes c as the body of a Completion, carrying its usage.
func NewCompletion(c *ChatCompletion) (*Completion, error) {
	if c.Object == "" {
		c.Object = "chat.completion"
	}
	for i := range c.Choices {
		if c.Choices[i].Message.Role == "" {
			c.Choices[i].Message.Role = RoleAssistant
		}
		if c.Choices[i].Logprobs == nil {
			c.Choices[i].Logprobs = json.RawMessage("null")
		}
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	out := &Completion{Body: body}
	if c.Usage != nil {
		out.Usage, out.HasUsage = c.Usage.Usage(), true
		out.Slot = encodedUsage(body, c.SystemFingerprint)
	}
	return out, nil
}

// encodedUsage locates the usage object in body, a ChatCompletion with
// usage just encoded, so that the gateway's cost goes in without walking
// a body it built itself. The object is the last member but
// system_fingerprint (the struct's field order), so it ends where that
// member's known encoding begins, and it starts at the last "usage" key
// before there: the object holds only numbers and keys of its own. A zero
// slot (the cost then found by a walk) if the body is not so.
func encodedUsage(body []byte, fingerprint string) UsageSlot {
	tail := 1 // the closing brace
	if fingerprint != "" {
		fp, err := json.Marshal(fingerprint)
		if err != nil {
			return UsageSlot{}
		}
		tail += len(`,"system_fingerprint":`) + len(fp)
	}
	end := len(body) - tail
	const key = `"usage":`
	at := bytes.LastIndex(body[:max(end, 0)], []byte(key))
	if at < 0 || body[end-1] != '}' || body[at+len(key)] != '{' {
		return UsageSlot{}
	}
	return UsageSlot{Start: at + len(key), End: end} // WireUsage is never empty, and has no cost
}

// EncodeChunk encodes ch as a stream Chunk. A chunk with usage and no
// choices is the trailing usage chunk (UsageOnly), which the relay
// withholds from clients that did not ask for stream_options.include_usage.
func EncodeChunk(ch *ChatChunk) (Chunk, error) {
	if ch.Object == "" {
		ch.Object = "chat.completion.chunk"
	}
	if ch.Choices == nil {
		ch.Choices = []ChunkChoice{}
	}
	data, err := json.Marshal(ch)
	if err != nil {
		return Chunk{}, err
	}
	out := Chunk{Data: data}
	if ch.Usage != nil {
		u := ch.Usage.Usage()
		out.Usage = &u
		out.UsageOnly = len(ch.Choices) == 0
	}
	return out, nil
}
