package main

import (
	"context"
	"os"
	"testing"

	"github.com/openai/openai-go/v3"
)

// embedderURL is the reference embedding server (contrib/embedder) that
// `make test` starts; a test that needs it fails, never skips, without it.
func embedderURL(t *testing.T) string {
	t.Helper()
	return embedderURLB(t)
}

// embedderURLB is embedderURL for tests and benchmarks.
func embedderURLB(t testing.TB) string {
	t.Helper()
	u := os.Getenv("GATEHOUSE_TEST_EMBEDDER")
	if u == "" {
		t.Fatal(`GATEHOUSE_TEST_EMBEDDER is not set: run eval "$(scripts/test-services start)" first (it starts contrib/embedder)`)
	}
	return u
}

// TestReferenceEmbedderThroughGatehouse: the reference embedding server
// serves OpenAI's embeddings through gatehouse to the official SDK, and
// its vectors put paraphrases close and unrelated questions far apart.
func TestReferenceEmbedderThroughGatehouse(t *testing.T) {
	gw := startGateway(t, `listen: 127.0.0.1:0
providers:
  - {name: local-embed, type: openai-compatible, base_url: `+embedderURL(t)+`/v1, local: true}
models:
  - name: all-minilm
    targets: [{provider: local-embed, model: all-minilm-l6-v2}]
keys:
  - {key: `+clientKey+`, name: tester, project: qa}
`)
	c := gw.client()
	out, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "all-minilm",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{
			"what is the capital of france?", "tell me france's capital city", "how do I bake sourdough bread at home?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Data) != 3 || len(out.Data[0].Embedding) != 384 || out.Usage.PromptTokens == 0 {
		t.Fatalf("%d vectors of %d dimensions, usage %+v", len(out.Data), len(out.Data[0].Embedding), out.Usage)
	}
	dot := func(a, b []float64) (s float64) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	v := [3][]float64{out.Data[0].Embedding, out.Data[1].Embedding, out.Data[2].Embedding}
	if near, far := dot(v[0], v[1]), dot(v[0], v[2]); near < 0.88 || far > 0.3 {
		t.Fatalf("cosines: paraphrase %.3f (want ≥ 0.88), unrelated %.3f (want ≤ 0.3)", near, far)
	}
}
