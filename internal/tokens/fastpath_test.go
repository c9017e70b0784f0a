package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// slowText is the estimate with no fast path: every character through
// feed, one by one. The fast paths of text and jsonString must agree
// with it exactly.
func slowText(s string) int {
	var e est
	for _, r := range s {
		if r < utf8.RuneSelf {
			e.feed(asciiClass[r], 0)
			continue
		}
		cls, w := runeClass(r)
		e.feed(cls, w)
	}
	return e.tokens()
}

// TestFastPathsAgree: on random mixes of the pieces prose is made of, the
// estimate of a text and of the same text as a JSON string equal the
// character-by-character one.
func TestFastPathsAgree(t *testing.T) {
	pieces := []string{" ", "  ", "\n", "\t", "a", "the", "word", "Word", "WORD", "supercalifragilistic", "x",
		".", ",", "(", "\"", "\\", "1", "12345", "é", "naïve", "日本", "A", "camelCase", "-", "__", "\u2028", "😀"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		want := slowText(s)
		if got := EstimateText(s); got != want {
			t.Fatalf("EstimateText(%q) = %d, one character at a time %d", s, got, want)
		}
		if got := stringTokens(llm.AppendQuote(nil, s)); got != want {
			t.Fatalf("stringTokens(%q) = %d, one character at a time %d", s, got, want)
		}
	}
}

// FuzzFastPathsAgree: on any text, the estimate with its fast paths
// equals the one fed a character at a time, read directly and through a
// JSON string's escapes. The request path reserves what the fast path
// says; the slow one is the estimator as specified.
func FuzzFastPathsAgree(f *testing.F) {
	for _, s := range []string{"", "the quick brown fox", "  camelCase\n\tfoo_bar(x) 12345", "naïve 日本 😀 \u2028 end", prose[:200]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := slowText(s)
		if got := EstimateText(s); got != want {
			t.Fatalf("EstimateText(%q) = %d, one character at a time %d", s, got, want)
		}
		if !utf8.ValidString(s) {
			return // request bodies are refused unless valid UTF-8
		}
		if got := stringTokens(llm.AppendQuote(nil, s)); got != want {
			t.Fatalf("stringTokens(%q) = %d, one character at a time %d", s, got, want)
		}
	})
}
