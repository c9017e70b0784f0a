package postgres

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gatehouse/internal/cache"
	"gatehouse/internal/store/postgres/pgtest"
)

func unitVector(r *rand.Rand, x []float32, amount float32) []float32 {
	y := make([]float32, len(x))
	var n float64
	for i := range y {
		y[i] = x[i] + amount*float32(r.NormFloat64())
		n += float64(y[i]) * float64(y[i])
	}
	for i := range y {
		y[i] /= float32(math.Sqrt(n))
	}
	return y
}

// TestPgvectorAgreesWithTheInProcessIndex: the same vectors in pgvector
// (PostgreSQL 18, HNSW) and in the in-process index give the same nearest
// key, with the same cosine, for the same queries, scopes kept apart;
// and a removed vector is gone from both.
func TestPgvectorAgreesWithTheInProcessIndex(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, pgtest.DSNFrom(t, "GATEHOUSE_TEST_PGVECTOR", "gh_vec_"))
	defer s.Close()
	pg, err := s.NewVectorIndex(ctx, 100000)
	if err != nil {
		t.Fatal(err)
	}
	local := cache.LocalIndex{Vectors: cache.NewVectors(0, 100000)}
	r := rand.New(rand.NewPCG(11, 12))
	const dim = 384
	zero := make([]float32, dim)
	topics := make([][]float32, 20)
	for i := range topics {
		topics[i] = unitVector(r, zero, 1)
	}
	var stored [][]float32
	for i := range 600 {
		scope := fmt.Sprint("scope-", i%3)
		vec := unitVector(r, topics[r.IntN(len(topics))], 0.08)
		stored = append(stored, vec)
		for _, idx := range []cache.VectorIndex{pg, local} {
			if err := idx.AddVector(ctx, scope, cache.Key(fmt.Sprint(i)), vec); err != nil {
				t.Fatal(err)
			}
		}
	}
	agree := 0
	for q := range 100 {
		src := r.IntN(len(stored))
		scope := fmt.Sprint("scope-", src%3)
		query := unitVector(r, stored[src], 0.02)
		pk, ps, pok, err := pg.SearchVector(ctx, scope, query)
		if err != nil {
			t.Fatal(err)
		}
		lk, ls, lok, _ := local.SearchVector(ctx, scope, query)
		if !pok || !lok {
			t.Fatalf("query %d: found pgvector %v, in-process %v", q, pok, lok)
		}
		if math.Abs(float64(ps-ls)) > 1e-3 && pk == lk {
			t.Fatalf("query %d: cosine %f in pgvector, %f in process", q, ps, ls)
		}
		var k int
		fmt.Sscan(string(lk), &k)
		if k%3 != src%3 {
			t.Fatalf("query %d: the in-process index answered from another scope", q)
		}
		if pk == lk {
			agree++
		}
	}
	if agree < 98 { // HNSW is approximate; the queries are near-duplicates
		t.Fatalf("pgvector and the in-process index agree on %d of 100 queries", agree)
	}
	if _, _, ok, _ := pg.SearchVector(ctx, "no-such-scope", stored[0]); ok {
		t.Fatal("pgvector found a vector in an empty scope")
	}
	if err := pg.RemoveVector(ctx, "scope-0", "0"); err != nil {
		t.Fatal(err)
	}
	if k, _, _, _ := pg.SearchVector(ctx, "scope-0", stored[0]); k == "0" {
		t.Fatal("a removed vector was found")
	}
	// A second process finds the table and its dimension.
	again, err := s.NewVectorIndex(ctx, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if k, _, ok, err := again.SearchVector(ctx, "scope-1", stored[1]); err != nil || !ok || k != "1" {
		t.Fatalf("a new index over the same table found %q, %v, %v", k, ok, err)
	}
	if err := again.AddVector(ctx, "scope-1", "short", []float32{1, 0}); err == nil {
		t.Fatal("a vector of another dimension was accepted")
	}
}
