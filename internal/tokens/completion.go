package tokens

import (
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"
)

// Completions counts the tokens of text a model wrote, for answers the
// upstream reported no usage for (a stream the client cancelled, one
// that broke, a server that never sends usage): OpenAI models with their
// own encoding (o200k_base or cl100k_base), others with EstimateText.
// Each vocabulary loads on first use; the counter is safe for concurrent
// use.
type Completions struct {
	o200k, cl100k func() *codec.Codec
}

// NewCompletions builds a counter; nothing is loaded until a count needs
// it.
func NewCompletions() *Completions {
	return &Completions{o200k: sync.OnceValue(codec.NewO200kBase), cl100k: sync.OnceValue(codec.NewCl100kBase)}
}

// Encoding names the tiktoken encoding of an OpenAI model id ("gpt-4o",
// "openai/gpt-4o-mini", "gpt-4-turbo", …); "" for a model of another
// family, whose tokenizer gatehouse does not have.
func Encoding(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "chatgpt-4o"), strings.HasPrefix(m, "gpt-4.1"),
		strings.HasPrefix(m, "gpt-4.5"), strings.HasPrefix(m, "gpt-5"), strings.HasPrefix(m, "o1"),
		strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"), strings.HasPrefix(m, "gpt-oss"):
		return "o200k_base"
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "text-embedding-"):
		return "cl100k_base"
	}
	return ""
}

// Count returns the tokens of text for model; exact is true when the
// model's own encoding counted them, false for the estimate.
func (c *Completions) Count(model, text string) (n int, exact bool) {
	if text == "" {
		return 0, true
	}
	var enc *codec.Codec
	switch Encoding(model) {
	case "o200k_base":
		enc = c.o200k()
	case "cl100k_base":
		enc = c.cl100k()
	default:
		return EstimateText(text), false
	}
	n, err := enc.Count(text)
	if err != nil {
		return EstimateText(text), false
	}
	return n, true
}
