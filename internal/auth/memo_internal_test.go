package auth

import (
	"context"
	"testing"
)

// hashRecorder answers every hash with a principal and keeps the last
// hash it was asked about.
type hashRecorder struct{ last Hash }

func (r *hashRecorder) ResolveHash(_ context.Context, h Hash) (*Principal, error) {
	r.last = h
	return &Principal{KeyID: "k"}, nil
}

// TestMemoServesMemoizedHash: a secret that resolved before is resolved
// by the hash the memo holds, not by a SHA-256 taken again (a hash
// planted under the secret's tag is what the resolver sees), and a
// secret never seen is hashed.
func TestMemoServesMemoizedHash(t *testing.T) {
	ctx := context.Background()
	m := NewHashMemo()
	var r hashRecorder
	if _, err := m.Resolve(ctx, "gh-memo-secret", &r); err != nil || r.last != HashKey("gh-memo-secret") {
		t.Fatalf("first use: %v, resolver saw %x", err, r.last)
	}
	planted := HashKey("something else")
	tag := memoTag(sipHash128(m.key, "gh-memo-secret"))
	m.shard(tag).put(tag, planted)
	if _, err := m.Resolve(ctx, "gh-memo-secret", &r); err != nil || r.last != planted {
		t.Fatalf("memoized use: %v, resolver saw %x, want the memoized %x", err, r.last, planted)
	}
	if _, err := m.Resolve(ctx, "gh-memo-other", &r); err != nil || r.last != HashKey("gh-memo-other") {
		t.Fatalf("another secret: %v, resolver saw %x", err, r.last)
	}
}

// TestMemoKeysDiffer: each memo draws its own key, so its tags cannot be
// known outside the process (nor carried from one process to another).
func TestMemoKeysDiffer(t *testing.T) {
	a, b := NewHashMemo(), NewHashMemo()
	if a.key == b.key || a.key == (sipKey{}) {
		t.Fatalf("memo keys %x and %x", a.key, b.key)
	}
}
