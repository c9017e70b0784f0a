package auth_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/auth"
)

// table is a HashResolver over a fixed set of secrets, which records the
// hashes it is asked about.
type table struct {
	mu    sync.Mutex
	keys  map[auth.Hash]*auth.Principal
	asked int
}

func newTable(secrets ...string) *table {
	t := &table{keys: map[auth.Hash]*auth.Principal{}}
	for _, s := range secrets {
		t.keys[auth.HashKey(s)] = &auth.Principal{KeyID: s}
	}
	return t
}

func (t *table) ResolveHash(_ context.Context, h auth.Hash) (*auth.Principal, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.asked++
	if p := t.keys[h]; p != nil {
		return p, nil
	}
	return nil, auth.ErrBadKey
}

func (t *table) remove(secret string) {
	t.mu.Lock()
	delete(t.keys, auth.HashKey(secret))
	t.mu.Unlock()
}

// resolveWhileChurning resolves from goroutines at once, 2,000 times each
// (the g-th goroutine's i-th call presents pick(g, i)), while one more
// goroutine removes churn(i) from tb and puts it back, 500 times: every
// answer must be the presented key's own principal or ErrBadKey (for the
// race detector, and for a memo that answers with another key's).
func resolveWhileChurning(t *testing.T, tb *table, goroutines int, pick func(g, i int) string, churn func(i int) string,
	resolve func(secret string) (*auth.Principal, error)) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range 2000 {
				s := pick(g, i)
				p, err := resolve(s)
				if err == nil && p.KeyID != s {
					t.Errorf("%s resolved to %s", s, p.KeyID)
					return
				}
				if err != nil && err != auth.ErrBadKey {
					t.Errorf("%s: %v", s, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 500 {
			s := churn(i)
			tb.remove(s)
			tb.mu.Lock()
			tb.keys[auth.HashKey(s)] = &auth.Principal{KeyID: s}
			tb.mu.Unlock()
		}
	})
	wg.Wait()
}

// memoKeys is a Keys over a store whose changes the test delivers by hand,
// with a HashMemo in front, as the gateway's request path has them.
func memoKeys(t *testing.T, clk *clock) (*auth.HashMemo, *auth.Keys, *spy) {
	t.Helper()
	sp := &spy{Store: openSQLite(t), changes: make(chan auth.Hash)}
	return auth.NewHashMemo(), newKeys(t, sp, auth.KeysOptions{Now: clk.Now}), sp
}

func mustResolve(t *testing.T, m *auth.HashMemo, r auth.HashResolver, secret, keyID string) {
	t.Helper()
	p, err := m.Resolve(context.Background(), secret, r)
	if err != nil || p.KeyID != keyID {
		t.Fatalf("%s: %+v %v, want key %s", secret, p, err, keyID)
	}
}

// TestMemoRevokedKeyRefused: a key that resolved (and so is memoized) is
// refused once revoked, and the memo forgets it.
func TestMemoRevokedKeyRefused(t *testing.T) {
	ctx := context.Background()
	m, k, sp := memoKeys(t, newClock())
	p := mustProject(t, sp, &auth.Project{Name: "p"})
	key := mustKey(t, sp, &auth.Key{ProjectID: p.ID}, "gh-memo-revoked")
	for range 3 {
		mustResolve(t, m, k, "gh-memo-revoked", key.ID)
	}
	if n := m.MemoLen(); n != 1 {
		t.Fatalf("memo holds %d secrets after a key's uses, want 1", n)
	}
	if err := sp.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	sp.deliver(key.Hash)
	if _, err := m.Resolve(ctx, "gh-memo-revoked", k); err != auth.ErrBadKey {
		t.Fatalf("revoked memoized key: %v, want ErrBadKey", err)
	}
	if n := m.MemoLen(); n != 0 {
		t.Errorf("memo holds %d secrets after the key was refused, want 0", n)
	}
	if _, err := m.Resolve(ctx, "gh-memo-revoked", k); err != auth.ErrBadKey {
		t.Fatalf("revoked key, asked again: %v, want ErrBadKey", err)
	}
}

// TestMemoRotatedKeyRefused: after a rotation the memoized old secret is
// refused and the new one resolves to the same key.
func TestMemoRotatedKeyRefused(t *testing.T) {
	ctx := context.Background()
	m, k, sp := memoKeys(t, newClock())
	p := mustProject(t, sp, &auth.Project{Name: "p"})
	key := mustKey(t, sp, &auth.Key{ProjectID: p.ID}, "gh-memo-old")
	mustResolve(t, m, k, "gh-memo-old", key.ID)
	mustResolve(t, m, k, "gh-memo-old", key.ID)
	if err := sp.RotateKey(ctx, key.ID, auth.HashKey("gh-memo-new"), "gh-memo"); err != nil {
		t.Fatal(err)
	}
	sp.deliver(key.Hash)
	sp.deliver(auth.HashKey("gh-memo-new"))
	if _, err := m.Resolve(ctx, "gh-memo-old", k); err != auth.ErrBadKey {
		t.Fatalf("old secret after rotation: %v, want ErrBadKey", err)
	}
	mustResolve(t, m, k, "gh-memo-new", key.ID)
	mustResolve(t, m, k, "gh-memo-new", key.ID)
	if n := m.MemoLen(); n != 1 {
		t.Errorf("memo holds %d secrets, want 1 (the new one)", n)
	}
}

// TestMemoExpiredKeyRefused: a memoized key is refused from its expiry
// on, with no change delivered.
func TestMemoExpiredKeyRefused(t *testing.T) {
	clk := newClock()
	m, k, sp := memoKeys(t, clk)
	p := mustProject(t, sp, &auth.Project{Name: "p"})
	exp := clk.Now().Add(time.Minute)
	key := mustKey(t, sp, &auth.Key{ProjectID: p.ID, ExpiresAt: &exp}, "gh-memo-expiring")
	mustResolve(t, m, k, "gh-memo-expiring", key.ID)
	mustResolve(t, m, k, "gh-memo-expiring", key.ID)
	clk.Advance(time.Minute)
	if _, err := m.Resolve(context.Background(), "gh-memo-expiring", k); err != auth.ErrBadKey {
		t.Fatalf("expired memoized key: %v, want ErrBadKey", err)
	}
}

// TestMemoOnlyResolvedKeys: unknown keys, the empty key and keys the
// store could not answer for leave nothing in the memo.
func TestMemoOnlyResolvedKeys(t *testing.T) {
	ctx := context.Background()
	m := auth.NewHashMemo()
	tb := newTable("gh-memo-known")
	for i := range 1000 {
		if _, err := m.Resolve(ctx, fmt.Sprintf("gh-unknown-%d", i), tb); err != auth.ErrBadKey {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if _, err := m.Resolve(ctx, "", tb); err != auth.ErrMissingKey {
		t.Fatalf("empty key: %v, want ErrMissingKey", err)
	}
	if tb.asked != 1000 {
		t.Errorf("resolver asked %d times, want 1000 (never for the empty key)", tb.asked)
	}
	sp := &spy{Store: openSQLite(t)}
	sp.fail.Store(true)
	k := newKeys(t, sp, auth.KeysOptions{})
	if _, err := m.Resolve(ctx, "gh-memo-store-down", k); !isUnavailable(err) {
		t.Fatalf("store down: %v, want unavailable", err)
	}
	if n := m.MemoLen(); n != 0 {
		t.Fatalf("memo holds %d secrets that never resolved", n)
	}
	mustResolve(t, m, tb, "gh-memo-known", "gh-memo-known")
	if n := m.MemoLen(); n != 1 {
		t.Fatalf("memo holds %d secrets after a known key, want 1", n)
	}
}

// TestMemoBounded: however many keys resolve, the memo keeps at most
// its bound, and each shard at most its share, while every key goes on
// resolving.
func TestMemoBounded(t *testing.T) {
	const n = auth.MemoShards*auth.MemoPerShard + 5000
	secrets := make([]string, n)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("gh-bounded-%d", i)
	}
	tb := newTable(secrets...)
	m := auth.NewHashMemo()
	for _, s := range secrets {
		mustResolve(t, m, tb, s, s)
	}
	if got := m.MemoLen(); got > auth.MemoShards*auth.MemoPerShard || got < auth.MemoShards*auth.MemoPerShard*9/10 {
		t.Fatalf("memo holds %d secrets, want at most %d and close to it", got, auth.MemoShards*auth.MemoPerShard)
	}
	for _, s := range secrets[:100] {
		mustResolve(t, m, tb, s, s) // evicted or not, still resolved
	}
}

// TestMemoConcurrent: many goroutines resolve, while keys are removed
// and come back (for the race detector; every answer must still match
// the table at some moment of the call).
func TestMemoConcurrent(t *testing.T) {
	ctx := context.Background()
	secrets := make([]string, 64)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("gh-concurrent-%d", i)
	}
	tb := newTable(secrets...)
	m := auth.NewHashMemo()
	resolveWhileChurning(t, tb, 8,
		func(g, i int) string { return secrets[(g*7+i)%len(secrets)] },
		func(i int) string { return secrets[i%len(secrets)] },
		func(s string) (*auth.Principal, error) { return m.Resolve(ctx, s, tb) })
}
