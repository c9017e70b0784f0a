package auth

import "context"

// Internals the external tests (package auth_test, which may import the
// stores) look at.

// CacheLen counts the cached active keys and bad hashes.
func (k *Keys) CacheLen() (keys, misses int) { return k.cache.len() }

// Flush writes the recorded last-used times now.
func (k *Keys) Flush(ctx context.Context) error { return k.flush(ctx) }

// MemoLen counts the memoized secrets.
func (m *HashMemo) MemoLen() int { return m.len() }

// MemoPerShard and MemoShards are the memo's bounds.
const MemoPerShard, MemoShards = memoPerShard, memoShards
