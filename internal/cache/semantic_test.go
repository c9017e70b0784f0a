package cache

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSemanticQueryScopes(t *testing.T) {
	q := func(key, body string) (SemanticQuery, bool) { return NewSemanticQuery("p", "m", key, []byte(body)) }
	base, ok := q("", `{"model":"a","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is the capital of france?"}]}`)
	if !ok || base.Text != "what is the capital of france?" {
		t.Fatalf("%+v %v", base, ok)
	}
	// Another question in the same conversation: same scope, other text.
	other, _ := q("", `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"tell me"},{"type":"text","text":"france's capital"}]}],"model":"b","stream":true}`)
	if other.Scope != base.Scope || other.Text != "tell me\nfrance's capital" {
		t.Fatalf("same conversation, another question: %+v vs %+v", other, base)
	}
	// A different system prompt, earlier turn, parameter or key: another scope.
	for what, body := range map[string]string{
		"system prompt": `{"messages":[{"role":"system","content":"be verbose"},{"role":"user","content":"what is the capital of france?"}]}`,
		"earlier turn":  `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"what is the capital of france?"}]}`,
		"temperature":   `{"temperature":1.5,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is the capital of france?"}]}`,
	} {
		if s, _ := q("", body); s.Scope == base.Scope {
			t.Errorf("%s changed but the scope did not", what)
		}
	}
	if s, _ := q("key_1", `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is the capital of france?"}]}`); s.Scope == base.Scope {
		t.Error("a per-key scope equals the project's")
	}
	if s, _ := NewSemanticQuery("q", "m", "", []byte(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is the capital of france?"}]}`)); s.Scope == base.Scope {
		t.Error("two projects share a scope")
	}
	// Not served semantically: the last message is not the user's, or not text.
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}]}`,
		`{"messages":[{"role":"user","content":"  "}]}`,
		`{"messages":[]}`,
		`not json`,
	} {
		if _, ok := q("", body); ok {
			t.Errorf("%s: served semantically", body)
		}
	}
}

func unit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var n float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += float64(v[i]) * float64(v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

func TestVectorsFindTheNearestAndEvictTheLeastUsed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	v := NewVectors(16, 200)
	vecs := map[Key][]float32{}
	for i := range 100 {
		k := Key(fmt.Sprint("k", i))
		vecs[k] = unit(r, 16)
		if gone := v.Add("s", k, vecs[k]); gone != nil {
			t.Fatalf("evicted %v below the bound", gone)
		}
	}
	// Every vector finds itself, with a cosine of 1; the brute force
	// agrees on a random query.
	for k, vec := range vecs {
		got, score, ok := v.Search("s", vec)
		if !ok || got != k || math.Abs(float64(score)-1) > 1e-5 {
			t.Fatalf("%s found %s at %f", k, got, score)
		}
	}
	q := unit(r, 16)
	want, wantScore := Key(""), float32(-2)
	for k, vec := range vecs {
		if d := dot(q, vec); d > wantScore {
			want, wantScore = k, d
		}
	}
	if got, score, _ := v.Search("s", q); got != want || score != wantScore {
		t.Fatalf("nearest %s (%f), brute force %s (%f)", got, score, want, wantScore)
	}
	if _, _, ok := v.Search("other", q); ok {
		t.Fatal("an empty scope found something")
	}
	// Over the bound the least recently used go: k0 was searched last
	// among the first, so it stays while k1… go.
	v.Search("s", vecs["k0"])
	var evicted []Key
	for i := range 150 {
		evicted = append(evicted, v.Add("t", Key(fmt.Sprint("t", i)), unit(r, 16))...)
	}
	if v.Len() > 200 || len(evicted) == 0 {
		t.Fatalf("%d vectors, %d evicted", v.Len(), len(evicted))
	}
	if _, _, ok := v.Search("s", vecs["k0"]); !ok {
		t.Fatal("scope s vanished")
	}
	if got, _, _ := v.Search("s", vecs["k0"]); got != "k0" {
		t.Fatalf("the recently used k0 was evicted (found %s)", got)
	}
	for _, k := range evicted {
		if k == "k0" {
			t.Fatal("k0 evicted")
		}
	}
	v.Remove("s", "k0")
	if got, _, _ := v.Search("s", vecs["k0"]); got == "k0" {
		t.Fatal("a removed vector was found")
	}
}

func BenchmarkVectorsSearch(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1000, 10000, 100000} {
		v := NewVectors(384, n)
		for i := range n {
			v.Add("s", Key(fmt.Sprint(i)), unit(r, 384))
		}
		q := unit(r, 384)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				v.Search("s", q)
			}
		})
	}
}

// TestInvertedFileFindsNearDuplicates: a scope past ivfMin gets an
// inverted file; a query near a stored vector (a paraphrase's cosine,
// about 0.9) still finds that vector, through additions, removals and a
// compaction after the file was built.
func TestInvertedFileFindsNearDuplicates(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const dim, n = 128, 2 * ivfMin
	v := NewVectors(dim, 10*n)
	// Questions cluster by topic, as real embeddings do: each vector is
	// one of 100 topics plus as much noise (a cosine of about 0.7 to it).
	topics := make([][]float32, 100)
	for i := range topics {
		topics[i] = unit(r, dim)
	}
	mix := func(x []float32, amount float32) []float32 {
		noise := unit(r, dim)
		y := make([]float32, dim)
		var norm float32
		for i := range y {
			y[i] = x[i] + amount*noise[i]
			norm += y[i] * y[i]
		}
		for i := range y {
			y[i] /= float32(math.Sqrt(float64(norm)))
		}
		return y
	}
	question := func() []float32 { return mix(topics[r.IntN(len(topics))], 1) }
	vecs := make([][]float32, n)
	for i := range n {
		vecs[i] = question()
		v.Add("s", Key(fmt.Sprint(i)), vecs[i])
	}
	v.Wait()
	v.mu.RLock()
	built := v.scopes["s"].ivf != nil
	v.mu.RUnlock()
	if !built {
		t.Fatal("no inverted file for a scope past ivfMin")
	}
	near := func(x []float32) []float32 { return mix(x, 0.45) } // a paraphrase: cosine about 0.91
	check := func(what string, ids []int) {
		t.Helper()
		missed := 0
		for _, i := range ids {
			if k, _, _ := v.Search("s", near(vecs[i])); k != Key(fmt.Sprint(i)) {
				missed++
			}
		}
		if missed*100 > len(ids) { // recall ≥ 99%
			t.Fatalf("%s: missed %d of %d near duplicates", what, missed, len(ids))
		}
	}
	ids := make([]int, 500)
	for i := range ids {
		ids[i] = r.IntN(n)
	}
	check("after the build", ids)
	// Remove a third (a compaction follows), add more: still found.
	for i := 0; i < n; i += 3 {
		v.Remove("s", Key(fmt.Sprint(i)))
	}
	for i := range ids {
		ids[i] = 3*r.IntN(n/3) + 1
	}
	check("after removals and a compaction", ids)
	for i := range ivfMin {
		x := question()
		vecs = append(vecs, x)
		v.Add("s", Key(fmt.Sprint(n+i)), x)
	}
	for i := range ids {
		ids[i] = n + r.IntN(ivfMin)
	}
	check("vectors added after the build", ids)
	if removed := (n + 2) / 3; v.Len() != n-removed+ivfMin {
		t.Fatalf("%d vectors, want %d", v.Len(), n-removed+ivfMin)
	}
}
