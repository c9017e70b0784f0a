// Package cachetest holds every lower tier of the exact cache (SQLite,
// Redis) to one contract. It is used only from tests.
package cachetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"gatehouse/internal/cache"
	"gatehouse/internal/llm"
)

// Run runs the contract against stores from open, each test on a fresh
// one.
func Run(t *testing.T, open func(t *testing.T) cache.Store) {
	t.Run("PutGet", func(t *testing.T) { testPutGet(t, open(t)) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, open(t)) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, open(t)) })
	t.Run("Promotion", func(t *testing.T) { testPromotion(t, open(t)) })
	t.Run("PurgeAfterQueuedWrites", func(t *testing.T) { testPurgeAfterQueuedWrites(t, open(t)) })
}

func entry(project string, ttl time.Duration) *cache.Entry {
	return &cache.Entry{Project: project, Completion: []byte(`{"id":"c","choices":[]}`), Cost: 42,
		Usage: llm.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, ServedModel: "m", Provider: "p",
		Deployment: "p/m", Expires: time.Now().Add(ttl).Truncate(time.Microsecond)}
}

func testPutGet(t *testing.T, s cache.Store) {
	ctx := context.Background()
	if e, err := s.GetEntry(ctx, "qa", "absent"); err != nil || e != nil {
		t.Fatalf("an absent key: %v, %v", e, err)
	}
	want := entry("qa", time.Hour)
	want.Completion = nil
	want.Chunks = []llm.Chunk{{Data: []byte(`{"a":"<&>"}`)}, {Data: []byte(`{"u":1}`), Usage: &llm.Usage{TotalTokens: 3}, UsageOnly: true}}
	if err := s.PutEntry(ctx, "k1", want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEntry(ctx, "qa", "k1")
	if err != nil || got == nil {
		t.Fatalf("get: %v, %v", got, err)
	}
	if !got.Expires.Equal(want.Expires) {
		t.Fatalf("expires %v, want %v", got.Expires, want.Expires)
	}
	got.Expires = want.Expires
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	// A second put replaces the first.
	next := entry("qa", time.Hour)
	if err := s.PutEntry(ctx, "k1", next); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetEntry(ctx, "qa", "k1"); got == nil || got.Completion == nil {
		t.Fatalf("after a second put: %+v", got)
	}
}

func testExpiry(t *testing.T, s cache.Store) {
	ctx := context.Background()
	if err := s.PutEntry(ctx, "gone", entry("qa", -time.Second)); err != nil {
		t.Fatal(err)
	}
	if e, err := s.GetEntry(ctx, "qa", "gone"); err != nil || e != nil {
		t.Fatalf("an expired entry was served: %+v, %v", e, err)
	}
	if p, ok := s.(cache.Pruner); ok {
		if err := s.PutEntry(ctx, "live", entry("qa", time.Hour)); err != nil {
			t.Fatal(err)
		}
		n, err := p.PruneEntries(ctx, time.Now(), 10)
		if err != nil || n != 1 {
			t.Fatalf("pruned %d (%v), want the 1 expired entry", n, err)
		}
		if e, _ := s.GetEntry(ctx, "qa", "live"); e == nil {
			t.Fatal("pruning took a live entry")
		}
	}
}

func testPurge(t *testing.T, s cache.Store) {
	ctx := context.Background()
	for _, k := range []cache.Key{"a1", "a2"} {
		if err := s.PutEntry(ctx, k, entry("a", time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutEntry(ctx, "b1", entry("b", time.Hour)); err != nil {
		t.Fatal(err)
	}
	n, err := s.PurgeEntries(ctx, "a")
	if err != nil || n != 2 {
		t.Fatalf("purged %d of project a (%v), want 2", n, err)
	}
	if e, _ := s.GetEntry(ctx, "a", "a1"); e != nil {
		t.Fatal("a1 survived its project's purge")
	}
	if e, _ := s.GetEntry(ctx, "b", "b1"); e == nil {
		t.Fatal("purging a took b's entry")
	}
	if n, err := s.PurgeEntries(ctx, ""); err != nil || n != 1 {
		t.Fatalf("purging everything removed %d (%v), want 1", n, err)
	}
}

// testPromotion holds cache.Cache over the tier: a write reaches the
// tier in the background, a fresh in-process tier finds it there (as a
// restarted process or another replica would) and keeps it in-process.
func testPromotion(t *testing.T, s cache.Store) {
	ctx := context.Background()
	first := cache.New(cache.Options{MaxBytes: 1 << 20, Lower: s})
	first.Put("shared", entry("qa", time.Hour))
	first.Close() // waits for the background write
	second := cache.New(cache.Options{MaxBytes: 1 << 20, Lower: s})
	defer second.Close()
	if second.Memory().Len() != 0 {
		t.Fatal("a new cache starts with entries in memory")
	}
	e, ok := second.Get(ctx, "qa", "shared")
	if !ok || e.Cost != 42 {
		t.Fatalf("the lower tier's entry was not found: %+v", e)
	}
	if second.Memory().Len() != 1 {
		t.Fatal("a lower-tier hit was not promoted to memory")
	}
	n, err := second.Purge(ctx, "qa")
	if err != nil || n != 2 {
		t.Fatalf("purge counted %d (%v), want 2: memory and the lower tier", n, err)
	}
	if _, ok := second.Get(ctx, "qa", "shared"); ok {
		t.Fatal("a purged entry was served")
	}
}

// testPurgeAfterQueuedWrites: a purge right after many puts leaves the
// tier empty of the project: no write still queued in the background
// lands after it and brings an entry back.
func testPurgeAfterQueuedWrites(t *testing.T, s cache.Store) {
	ctx := context.Background()
	c := cache.New(cache.Options{MaxBytes: 1 << 20, Lower: s})
	for i := range 200 {
		c.Put(cache.Key(fmt.Sprint("q", i)), entry("qa", time.Hour))
	}
	if _, err := c.Purge(ctx, "qa"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i := range 200 {
		if e, _ := s.GetEntry(ctx, "qa", cache.Key(fmt.Sprint("q", i))); e != nil {
			t.Fatalf("entry q%d came back after the purge", i)
		}
	}
}
