package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/store/sqlite"
)

// BenchmarkAuthenticate measures the auth step of a request against a
// store of 100,000 keys: a cached key (the request path), a static key
// from the config, and an unknown key answered from the negative cache.
func BenchmarkAuthenticate(b *testing.B) {
	const n = 100_000
	// Each CreateKey commits (and fsyncs) alone; on tmpfs the setup takes
	// seconds instead of most of a minute. The lookups measured here never
	// reach the file anyway.
	dir := b.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err = os.MkdirTemp("/dev/shm", "gatehouse-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	p := mustProject(b, st, &auth.Project{Name: "bench", Models: []string{"gpt-4o-mini"}})
	start := time.Now()
	for i := range n {
		mustKey(b, st, &auth.Key{ProjectID: p.ID, Limits: auth.Limits{RPM: 600}, Prefix: "gh-bnch"},
			fmt.Sprintf("gh-bench-%024d", i))
	}
	b.Logf("created %d keys in %v", n, time.Since(start))
	k := newKeys(b, st, auth.KeysOptions{}, auth.StaticKey{
		Secret: fmt.Sprintf("gh-static-%023d", 7), Principal: auth.Principal{KeyID: "static:bench"},
	})
	req := func(secret string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		return r
	}
	run := func(b *testing.B, r *http.Request, want error) {
		if _, err := k.Authenticate(r); err != want {
			b.Fatalf("warm-up: %v", err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := k.Authenticate(r); err != want {
				b.Fatal(err)
			}
		}
	}
	b.Run("cached", func(b *testing.B) { run(b, req(fmt.Sprintf("gh-bench-%024d", n/2)), nil) })
	b.Run("static", func(b *testing.B) { run(b, req(fmt.Sprintf("gh-static-%023d", 7)), nil) })
	b.Run("negative", func(b *testing.B) { run(b, req(fmt.Sprintf("gh-bogus-%024d", 1)), auth.ErrBadKey) })
	b.Run("cached-parallel", func(b *testing.B) {
		// Many keys from many goroutines: the shards' read locks and the
		// last-used check under contention.
		const hot = 1024
		reqs := make([]*http.Request, hot)
		for i := range reqs {
			reqs[i] = req(fmt.Sprintf("gh-bench-%024d", i*(n/hot)))
			if _, err := k.Authenticate(reqs[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := k.Authenticate(reqs[i%hot]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}
