package cache

import (
	"strings"
	"testing"
)

// BenchmarkNewKey: the key of a small chat request (the request-path
// benchmark's body), what every cached request pays before its lookup.
func BenchmarkNewKey(b *testing.B) {
	prompt := strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]
	body := []byte(`{"model":"chat","messages":[{"role":"user","content":"` + prompt + `"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewKey("proj_x", "chat", body); err != nil {
			b.Fatal(err)
		}
	}
}
