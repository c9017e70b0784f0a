package tokens

import (
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer/codec"
)

func TestEncodingOfModels(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": "o200k_base", "openai/gpt-4o-mini": "o200k_base", "gpt-4.1-nano": "o200k_base", "o3-mini": "o200k_base",
		"gpt-5": "o200k_base", "gpt-4-turbo": "cl100k_base", "gpt-3.5-turbo": "cl100k_base", "text-embedding-3-small": "cl100k_base",
		"claude-sonnet-4-5": "", "gemini-2.5-flash": "", "llama3.3:70b": "",
	} {
		if got := Encoding(model); got != want {
			t.Errorf("Encoding(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestCompletionsCount(t *testing.T) {
	c := NewCompletions()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog; naïve café owners count tokens. ", 20)
	o200k, _ := codec.NewO200kBase().Count(text)
	cl100k, _ := codec.NewCl100kBase().Count(text)
	if n, exact := c.Count("gpt-4o-mini", text); n != o200k || !exact {
		t.Errorf("gpt-4o-mini: %d (exact %v), want %d", n, exact, o200k)
	}
	if n, exact := c.Count("gpt-4", text); n != cl100k || !exact {
		t.Errorf("gpt-4: %d (exact %v), want %d", n, exact, cl100k)
	}
	if n, exact := c.Count("claude-haiku-4-5", text); n != EstimateText(text) || exact {
		t.Errorf("claude: %d (exact %v), want the estimate %d", n, exact, EstimateText(text))
	}
	if n, _ := c.Count("gpt-4o", ""); n != 0 {
		t.Errorf("empty text: %d", n)
	}
}
