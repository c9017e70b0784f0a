package redis

import (
	"context"
	"testing"
	"time"

	"gatehouse/internal/cache"
	"gatehouse/internal/cache/cachetest"
)

func TestCacheTier(t *testing.T) {
	c := testClient(t)
	cachetest.Run(t, func(t *testing.T) cache.Store { return NewCache(c, testPrefix(t, c)) })
}

// TestCacheEntriesExpireInRedis: an entry goes with its TTL, and its
// project's index with its longest-lived entry, so nothing outlives the
// cache's TTLs.
func TestCacheEntriesExpireInRedis(t *testing.T) {
	c := testClient(t)
	s := NewCache(c, testPrefix(t, c))
	ctx := context.Background()
	e := &cache.Entry{Project: "qa", Completion: []byte(`{}`), Expires: time.Now().Add(90 * time.Second)}
	if err := s.PutEntry(ctx, "k", e); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{s.entryKey("qa", "k"), s.indexKey("qa")} {
		ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil || ms <= 80_000 || ms > 90_000 {
			t.Fatalf("%s: ttl %d ms (%v), want about 90 s", key, ms, err)
		}
	}
}
