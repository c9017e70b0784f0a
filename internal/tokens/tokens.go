// Package tokens estimates how many tokens a prompt holds, offline, for
// the uses that must know before (or without) asking a model: the
// Anthropic-compatible count_tokens endpoint (Counter, exact for o200k),
// and the reservations of rate limits and budgets (EstimateChat and
// EstimateInput: an allocation-free approximation fast enough for every
// request; see estimate.go).
//
// Counts use OpenAI's o200k_base encoding (GPT-4o and later). For models
// of other families they are an estimate: other tokenizers split text
// differently (Claude's typically yields somewhat more tokens for the same
// text), and images and message framing are counted with fixed
// allowances. It imports llm only, plus the tokenizer.
package tokens

import (
	"github.com/tiktoken-go/tokenizer/codec"

	"gatehouse/internal/llm"
)

// Fixed allowances for what the encoding cannot see.
const (
	// MessageOverhead is what chat formats spend per message on role
	// markers and separators (OpenAI's documented figure is 3–4).
	MessageOverhead = 4
	// ReplyPriming is added once per prompt for the assistant turn the
	// model is about to write.
	ReplyPriming = 3
	// ToolOverhead covers the framing around one tool definition.
	ToolOverhead = 8
	// ImageTokens is a flat allowance per image: its real cost depends
	// on pixel size, which the gateway does not decode (about a 1 MP
	// image for Claude, between low and high detail for GPT-4o).
	ImageTokens = 1200
)

// Counter counts tokens with o200k_base. It is safe for concurrent use;
// building one loads the vocabulary (tens of milliseconds, a few tens of
// MB), so a process keeps one.
type Counter struct {
	enc *codec.Codec
}

// New builds a Counter.
func New() *Counter {
	return &Counter{enc: codec.NewO200kBase()}
}

// Count returns the number of tokens in text.
func (c *Counter) Count(text string) int {
	if text == "" {
		return 0
	}
	n, err := c.enc.Count(text)
	if err != nil {
		// Only strict UTF-8 mode fails, which is not set; a rough count
		// beats none if that ever changes.
		return (len(text) + 3) / 4
	}
	return n
}

// Chat estimates the prompt tokens of a chat request: every message's
// text, tool calls and results, reasoning handed back, images at a flat
// allowance, and the tool definitions.
func (c *Counter) Chat(p *llm.ChatParams) int {
	n := ReplyPriming
	for i := range p.Messages {
		m := &p.Messages[i]
		n += MessageOverhead + c.Count(m.Role) + c.Count(m.Name)
		for _, part := range m.Content {
			switch part.Type {
			case llm.PartText:
				n += c.Count(part.Text)
			case llm.PartImageURL:
				n += ImageTokens
			default:
				n += c.Count(string(part.Raw))
			}
		}
		for _, tc := range m.ToolCalls {
			n += c.Count(tc.Name) + c.Count(tc.Arguments) + MessageOverhead
		}
		n += c.Count(m.Reasoning) + c.Count(m.Refusal)
	}
	for _, t := range p.Tools {
		n += ToolOverhead + c.Count(t.Name) + c.Count(t.Description) + c.Count(string(t.Parameters))
	}
	return n
}
