package auth

import (
	"bytes"
	"context"
	"testing"
)

// TestConnMemoServesRemembered: the connection's second request with a
// secret is resolved by the hash its entry holds (a hash planted there
// is what the resolver sees), without the memo; another secret is not.
func TestConnMemoServesRemembered(t *testing.T) {
	m := NewHashMemo()
	ctx, conn := context.Background(), new(ConnMemo)
	var r hashRecorder
	if _, err := m.ResolveOn(ctx, conn, "gh-conn-secret", &r); err != nil || r.last != HashKey("gh-conn-secret") {
		t.Fatalf("first use: %v, resolver saw %x", err, r.last)
	}
	if e := conn.last.Load(); e == nil || e.secret != "gh-conn-secret" || e.hash != HashKey("gh-conn-secret") {
		t.Fatalf("the connection's entry after a resolved secret: %+v", e)
	}
	planted := HashKey("something else")
	conn.last.Store(&connSecret{secret: "gh-conn-secret", hash: planted})
	if _, err := m.ResolveOn(ctx, conn, "gh-conn-secret", &r); err != nil || r.last != planted {
		t.Fatalf("remembered secret: %v, resolver saw %x, want the connection's %x", err, r.last, planted)
	}
	if _, err := m.ResolveOn(ctx, conn, "gh-conn-secreu", &r); err != nil || r.last != HashKey("gh-conn-secreu") {
		t.Fatalf("another secret of the same length: %v, resolver saw %x", err, r.last)
	}
}

// TestConnMemoReplacedAfterMisses: the connection's entry gives way to
// another secret that resolves on its connMissesToReplace-th miss, not
// before, whether the entry is hit in between (keys in turn) or not (a
// client that changed its key).
func TestConnMemoReplacedAfterMisses(t *testing.T) {
	ctx, conn, m := context.Background(), new(ConnMemo), NewHashMemo()
	var r hashRecorder
	resolve := func(secret string) {
		t.Helper()
		if _, err := m.ResolveOn(ctx, conn, secret, &r); err != nil || r.last != HashKey(secret) {
			t.Fatalf("%s: %v, resolver saw %x", secret, err, r.last)
		}
	}
	entry := func() string {
		if e := conn.last.Load(); e != nil {
			return e.secret
		}
		return ""
	}
	resolve("gh-conn-first")
	if got := entry(); got != "gh-conn-first" {
		t.Fatalf("entry after the first secret: %q", got)
	}
	for i := 1; i < connMissesToReplace; i++ {
		resolve("gh-conn-other")
		if got := entry(); got != "gh-conn-first" {
			t.Fatalf("entry right after miss %d: %q, want gh-conn-first until %d", i, got, connMissesToReplace)
		}
		resolve("gh-conn-first")
		if got := entry(); got != "gh-conn-first" {
			t.Fatalf("entry after %d misses: %q, want gh-conn-first until %d", i, got, connMissesToReplace)
		}
	}
	resolve("gh-conn-other")
	if got := entry(); got != "gh-conn-other" {
		t.Fatalf("entry after %d misses: %q, want gh-conn-other", connMissesToReplace, got)
	}
	for i := 1; i < connMissesToReplace; i++ {
		resolve("gh-conn-third")
	}
	if got := entry(); got != "gh-conn-other" {
		t.Fatalf("entry after %d misses in a row: %q, want gh-conn-other", connMissesToReplace-1, got)
	}
	resolve("gh-conn-third")
	if got := entry(); got != "gh-conn-third" {
		t.Fatalf("entry after %d misses in a row: %q, want gh-conn-third", connMissesToReplace, got)
	}
}

// TestSameSecret: equal bytes and nothing else, at every length from
// empty to past a few words, a difference at every position and in
// every bit.
func TestSameSecret(t *testing.T) {
	for n := range 42 {
		a := bytes.Repeat([]byte{0x5a}, n)
		for i := range a {
			a[i] = byte(i*37 + n)
		}
		if !sameSecret(string(a), string(append([]byte(nil), a...))) {
			t.Fatalf("length %d: equal secrets told apart", n)
		}
		if sameSecret(string(a), string(a)+"x") || sameSecret(string(a)+"x", string(a)) {
			t.Fatalf("length %d: secrets of different lengths taken as one", n)
		}
		for i := range n {
			for bit := range 8 {
				b := append([]byte(nil), a...)
				b[i] ^= 1 << bit
				if sameSecret(string(a), string(b)) {
					t.Fatalf("length %d: byte %d, bit %d changed, taken as the same", n, i, bit)
				}
			}
		}
	}
}

// refuser refuses every hash.
type refuser struct{}

func (refuser) ResolveHash(context.Context, Hash) (*Principal, error) { return nil, ErrBadKey }

// TestConnMemoDropsRefused: a remembered secret the resolver refuses
// (revoked, expired, rotated) is dropped from the connection and the
// memo at once; one refused without having been remembered leaves the
// connection's entry as it was.
func TestConnMemoDropsRefused(t *testing.T) {
	ctx, conn, m := context.Background(), new(ConnMemo), NewHashMemo()
	var r hashRecorder
	for range 2 {
		if _, err := m.ResolveOn(ctx, conn, "gh-conn-refused", &r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.ResolveOn(ctx, conn, "gh-conn-refused", refuser{}); err != ErrBadKey {
		t.Fatalf("refused: %v, want ErrBadKey", err)
	}
	if e := conn.last.Load(); e != nil || m.len() != 0 {
		t.Fatalf("after the refusal: connection's entry %+v, memo of %d, want neither", e, m.len())
	}
	if _, err := m.ResolveOn(ctx, conn, "gh-conn-kept", &r); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ResolveOn(ctx, conn, "gh-conn-other", refuser{}); err != ErrBadKey {
		t.Fatalf("unknown key: %v, want ErrBadKey", err)
	}
	if e := conn.last.Load(); e == nil || e.secret != "gh-conn-kept" {
		t.Fatalf("after an unknown key: connection's entry %+v, want gh-conn-kept's", e)
	}
}
