package tokens

import (
	"errors"
	"testing"

	"gatehouse/internal/llm"
)

// The expected prices are the committed catalog's (LiteLLM 1.106.2, see
// make prices); where the dataset moved since the hand-written catalog of
// 2025-08-15 (Gemini and Mistral cache reads, Mistral Large 3, DeepSeek
// V3.2's one price for chat and reasoner), the dataset's figure is here.
func TestLookupNormalises(t *testing.T) {
	c, err := NewCatalog(CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.AsOf() == "" {
		t.Error("catalog has no date")
	}
	for _, tc := range []struct {
		model string
		want  Price
	}{
		{"gpt-4o", PerMillion(2.5, 1.25, 10)},
		{"GPT-4o-2024-08-06", PerMillion(2.5, 1.25, 10)},
		{"openai/gpt-4o-mini-2024-07-18", PerMillion(0.15, 0.075, 0.6)},
		{"gpt-4.1-nano-2025-04-14", PerMillion(0.1, 0.025, 0.4)},
		{"o3-pro-2025-06-10", PerMillion(20, 0, 80)},
		{"o3-2025-04-16", PerMillion(2, 0.5, 8)},
		{"claude-3-5-sonnet-20241022", PerMillion(3, 0.3, 15)},
		{"claude-3-5-haiku-latest", PerMillion(0.8, 0.08, 4)},
		{"claude-opus-4-1-20250805", PerMillion(15, 1.5, 75)},
		{"claude-sonnet-4-20250514", PerMillion(3, 0.3, 15)},
		{"us.anthropic.claude-sonnet-4-20250514-v1:0", PerMillion(3, 0.3, 15)},
		{"anthropic.claude-3-haiku-20240307-v1:0", PerMillion(0.25, 0.03, 1.25)},
		{"claude-3-5-sonnet-v2@20241022", PerMillion(3, 0.3, 15)},
		{"amazon.nova-pro-v1:0", PerMillion(0.8, 0.2, 3.2)},
		{"models/gemini-2.5-flash", PerMillion(0.3, 0.03, 2.5)},
		{"gemini-2.5-flash-lite-preview-06-17", PerMillion(0.1, 0.01, 0.4)},
		{"gemini-1.5-flash-002", PerMillion(0.075, 0.01875, 0.3)},
		{"mistral-large-latest", PerMillion(0.5, 0.05, 1.5)},
		{"mistral-small-2503", PerMillion(0.1, 0.01, 0.3)},
		{"groq/llama-3.3-70b-versatile", PerMillion(0.59, 0, 0.79)},
		{"deepseek-reasoner", PerMillion(0.28, 0.028, 0.42)},
		{"grok-3-mini", PerMillion(0.3, 0.075, 0.5)},
		{"text-embedding-3-small", PerMillion(0.02, 0, 0)},
		{"gemini/gemini-2.5-pro", PerMillion(1.25, 0.125, 10)},
	} {
		got, ok := c.Lookup(tc.model)
		if !ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.model, got, ok, tc.want)
		}
		// Served from the resolution cache the second time, same answer.
		if again, _ := c.Lookup(tc.model); again != got {
			t.Errorf("%s: cached lookup differs", tc.model)
		}
	}
	for _, m := range []string{"llama3:8b", "my-finetune", ""} {
		if _, ok := c.Lookup(m); ok {
			t.Errorf("%q has a price", m)
		}
	}
}

func TestOverridesAndUnknownPolicy(t *testing.T) {
	local := Price{}
	c, err := NewCatalog(CatalogOptions{Overrides: map[string]Price{
		"openai/gpt-4o": PerMillion(1, 0.5, 4),
		"llama3":        local,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Lookup("gpt-4o-2024-11-20"); p != PerMillion(1, 0.5, 4) {
		t.Errorf("override not applied to a dated snapshot: %+v", p)
	}
	if p, ok := c.Lookup("llama3:8b"); !ok || p != local {
		t.Errorf("free local model: %+v %v", p, ok)
	}
	_, err = c.Estimate("mystery-model", 10, 10)
	var ue *UnknownPriceError
	if !errors.As(err, &ue) || ue.Model != "mystery-model" || !errors.Is(err, ErrUnknownPrice) {
		t.Fatalf("unknown model: %v", err)
	}
	def := PerMillion(10, 0, 30)
	c, _ = NewCatalog(CatalogOptions{Default: &def, DefaultMaxOutput: 1000})
	got, err := c.Estimate("mystery-model", 1000, 0)
	if err != nil || got != 10_000+30_000 {
		t.Fatalf("default price estimate: %d %v, want 40000 µ$", got, err)
	}
	if _, err := NewCatalog(CatalogOptions{Overrides: map[string]Price{"x": {Input: -1}}}); err == nil {
		t.Error("negative override accepted")
	}
}

func TestCostArithmetic(t *testing.T) {
	p := PerMillion(2.5, 1.25, 10) // gpt-4o
	// 1000 prompt tokens of which 400 cached, 200 completion of which
	// 50 reasoning: 600×2.5 + 400×1.25 + 200×10 = 1500+500+2000 µ$ ×1e-6×1e6.
	u := llm.Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 200, ReasoningTokens: 50}
	if got := p.Cost(u); got != 4000 {
		t.Errorf("cost %d µ$, want 4000", got)
	}
	if got := p.Estimate(1000, 200); got != 4500 {
		t.Errorf("estimate %d µ$, want 4500", got)
	}
	// Estimates round up, costs to the nearest micro-dollar.
	cheap := PerMillion(0.15, 0.075, 0.6)
	if got := cheap.Estimate(1, 0); got != 1 {
		t.Errorf("1 token estimate %d, want 1 (rounded up)", got)
	}
	if got := cheap.Cost(llm.Usage{PromptTokens: 1}); got != 0 {
		t.Errorf("1 token cost %d, want 0", got)
	}
	if got := cheap.Cost(llm.Usage{PromptTokens: 10}); got != 2 {
		t.Errorf("10 tokens cost %d, want 2 (1.5 rounded)", got)
	}
	// Cached rate defaults to the input rate; odd reports are clamped.
	noCache := PerMillion(3, 0, 15)
	if got := noCache.Cost(llm.Usage{PromptTokens: 100, CachedTokens: 500}); got != 300 {
		t.Errorf("cached > prompt: %d", got)
	}
	if got := noCache.Cost(llm.Usage{CompletionTokens: 10, ReasoningTokens: 30}); got != 450 {
		t.Errorf("reasoning above completion: %d, want 450", got)
	}
	// A failed call with no usage costs nothing.
	if got := p.Cost(llm.Usage{}); got != 0 {
		t.Errorf("zero usage costs %d", got)
	}
	c, _ := NewCatalog(CatalogOptions{})
	if got, _ := c.Estimate("gpt-4o", 100, 0); got != p.Estimate(100, DefaultMaxOutput) {
		t.Errorf("default output cap not applied: %d", got)
	}
}

func BenchmarkLookupAndEstimate(b *testing.B) {
	c, _ := NewCatalog(CatalogOptions{})
	b.ReportAllocs()
	for b.Loop() {
		c.Estimate("gpt-4o-mini-2024-07-18", 1200, 512)
	}
}

func TestContextWindow(t *testing.T) {
	c, err := NewCatalog(CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]int{"gpt-4o": 128000, "openai/gpt-4o-mini-2024-07-18": 128000,
		"claude-sonnet-4-5": 200000, "models/gemini-2.5-flash": 1048576, "text-embedding-3-small": 8191} {
		if got, ok := c.ContextWindow(model); !ok || got != want {
			t.Errorf("ContextWindow(%q) = %d, %v; want %d", model, got, ok, want)
		}
	}
	if _, ok := c.ContextWindow("my-own-finetune"); ok {
		t.Error("a context window for an unknown model")
	}
}

func TestFamily(t *testing.T) {
	for id, want := range map[string]string{"claude-sonnet-4-20250514": "claude-sonnet-4", "gpt-4o-2024-08-06": "gpt-4o",
		"gpt-3.5-turbo-0125": "gpt-3.5-turbo", "mistral-large-latest": "mistral-large", "gpt-4o": "", "o3-mini": ""} {
		got, ok := Family(id)
		if got != want || ok != (want != "") {
			t.Errorf("Family(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}
