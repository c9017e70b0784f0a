package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"gatehouse/internal/cache"
	"gatehouse/internal/config"
	"gatehouse/internal/server"
)

// BenchmarkSemanticLookup splits what the semantic cache adds to a miss
// into its two parts: the embedding call (gatehouse's embeddings client
// against the reference MiniLM server of contrib/embedder, over loopback)
// and the search of the in-process index holding N vectors of that
// model's 384 dimensions in the request's scope. Each reports its median
// as p50-ms.
//
//	eval "$(scripts/test-services start)"
//	go test -run '^$' -bench BenchmarkSemanticLookup -benchtime 200x ./cmd/gatehouse/
func BenchmarkSemanticLookup(b *testing.B) {
	u := embedderURLB(b)
	cfg, err := config.Parse([]byte(`providers:
  - {name: local-embed, type: openai-compatible, base_url: `+u+`/v1, local: true}
`), "bench.yaml", providerTypes())
	if err != nil {
		b.Fatal(err)
	}
	d, _, err := providerDeployment(providerTypes(), &cfg.Providers[0])
	if err != nil {
		b.Fatal(err)
	}
	d.Model = "all-minilm-l6-v2"
	embed, err := server.NewEmbedder(d)
	if err != nil {
		b.Fatal(err)
	}
	questions := []string{"what is the capital of france?", "tell me france's capital city",
		"how do I bake sourdough bread at home?", "which planet is the largest in the solar system?"}
	ctx := context.Background()
	b.Run("embed", func(b *testing.B) {
		var took []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if _, err := embed(ctx, questions[i%len(questions)]); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(t0))
			i++
		}
		reportP50(b, took)
	})
	q, err := embed(ctx, questions[0])
	if err != nil {
		b.Fatal(err)
	}
	dim := len(q)
	// Stored questions cluster by topic, as real ones do (a cosine of
	// about 0.7 to one of 200 topics); a query is a paraphrase of a
	// stored one (a cosine of about 0.91), and recall is how often the
	// search returns that one.
	r := rand.New(rand.NewPCG(7, 8))
	topics := make([][]float32, 200)
	for i := range topics {
		topics[i] = randomUnit(r, dim)
	}
	for _, n := range []int{1000, 10000, 100000} {
		v := cache.NewVectors(0, n)
		stored := make([][]float32, n)
		for i := range n {
			stored[i] = mixUnit(r, topics[r.IntN(len(topics))], 1)
			v.Add("scope", cache.Key(fmt.Sprint(i)), stored[i])
		}
		v.Wait() // the inverted file of a scope past 4,096 vectors
		b.Run(fmt.Sprintf("search-%d", n), func(b *testing.B) {
			var took []time.Duration
			found, i := 0, 0
			for b.Loop() {
				src := r.IntN(n)
				q := mixUnit(r, stored[src], 0.45)
				t0 := time.Now()
				k, _, _ := v.Search("scope", q)
				took = append(took, time.Since(t0))
				if k == cache.Key(fmt.Sprint(src)) {
					found++
				}
				i++
			}
			reportP50(b, took)
			b.ReportMetric(float64(found)/float64(i), "recall")
		})
	}
}

// mixUnit is x plus amount of random noise, scaled to unit length.
func mixUnit(r *rand.Rand, x []float32, amount float32) []float32 {
	noise := randomUnit(r, len(x))
	y := make([]float32, len(x))
	var n float64
	for i := range y {
		y[i] = x[i] + amount*noise[i]
		n += float64(y[i]) * float64(y[i])
	}
	for i := range y {
		y[i] /= float32(math.Sqrt(n))
	}
	return y
}

func reportP50(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "p50-ms")
}

func randomUnit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var n float32
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += v[i] * v[i]
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(float64(n)))
	}
	return v
}
