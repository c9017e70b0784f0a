package auth_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/auth"
)

// connResolve resolves secret on the connection whose ConnMemo is conn
// and wants the principal of keyID.
func connResolve(t *testing.T, conn *auth.ConnMemo, m *auth.HashMemo, r auth.HashResolver, secret, keyID string) {
	t.Helper()
	p, err := m.ResolveOn(context.Background(), conn, secret, r)
	if err != nil || p.KeyID != keyID {
		t.Fatalf("%q on the connection: %+v %v, want key %s", secret, p, err, keyID)
	}
}

// TestConnMemoAlternatingKeys: a connection that carries two keys in
// turn (a shared proxy's) gets each key's own principal every time,
// and an unknown key between them is refused.
func TestConnMemoAlternatingKeys(t *testing.T) {
	const a, b = "gh-conn-alternating-a", "gh-conn-alternating-b"
	tb := newTable(a, b)
	m := auth.NewHashMemo()
	conn := new(auth.ConnMemo)
	for i := range 10 {
		connResolve(t, conn, m, tb, a, a)
		connResolve(t, conn, m, tb, a, a)
		connResolve(t, conn, m, tb, b, b)
		if i%3 == 0 {
			if _, err := m.ResolveOn(context.Background(), conn, "gh-conn-alternating-c", tb); err != auth.ErrBadKey {
				t.Fatalf("unknown key between the two: %v, want ErrBadKey", err)
			}
		}
	}
}

// TestConnMemoOneByteApart: after a secret resolved on a connection,
// every secret of its length that differs from it in one byte, at any
// position, gets its own answer: its own principal when it is a key,
// ErrBadKey when it is not; never the remembered secret's. Lengths
// cover whole words, a tail of bytes, and a secret shorter than a word.
func TestConnMemoOneByteApart(t *testing.T) {
	for _, n := range []int{5, 16, 21, 46} {
		secret := strings.Repeat("k", n)
		for i := range n {
			for _, c := range []byte{'j', 'k' ^ 0x80, 'K'} {
				other := []byte(secret)
				other[i] = c
				near := string(other)
				m := auth.NewHashMemo()
				tb := newTable(secret)
				conn := new(auth.ConnMemo)
				connResolve(t, conn, m, tb, secret, secret)
				if p, err := m.ResolveOn(context.Background(), conn, near, tb); err != auth.ErrBadKey {
					t.Fatalf("length %d, byte %d changed to %q: %+v %v, want ErrBadKey", n, i, c, p, err)
				}
				connResolve(t, conn, m, tb, secret, secret)
				tb.mu.Lock()
				tb.keys[auth.HashKey(near)] = &auth.Principal{KeyID: near}
				tb.mu.Unlock()
				connResolve(t, conn, m, tb, near, near)
				connResolve(t, conn, m, tb, secret, secret)
			}
		}
	}
}

// TestConnMemoRevokedKey: a connection that keeps presenting a key is
// refused on its first request after the key is revoked, and on every
// one after; the memo forgets the secret (TestConnMemoDropsRefused
// looks at the connection).
func TestConnMemoRevokedKey(t *testing.T) {
	bg := context.Background()
	m, k, sp := memoKeys(t, newClock())
	p := mustProject(t, sp, &auth.Project{Name: "p"})
	key := mustKey(t, sp, &auth.Key{ProjectID: p.ID}, "gh-conn-revoked")
	conn := new(auth.ConnMemo)
	for range 3 {
		connResolve(t, conn, m, k, "gh-conn-revoked", key.ID)
	}
	if err := sp.RevokeKey(bg, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	sp.deliver(key.Hash)
	for range 2 {
		if _, err := m.ResolveOn(context.Background(), conn, "gh-conn-revoked", k); err != auth.ErrBadKey {
			t.Fatalf("revoked key on its connection: %v, want ErrBadKey", err)
		}
		if n := m.MemoLen(); n != 0 {
			t.Fatalf("memo holds %d secrets after the key was refused, want 0", n)
		}
	}
}

// TestConnMemoWithoutConnection: with no ConnMemo (a request not served
// by gatehouse's servers) a secret resolves through the memo alone.
func TestConnMemoWithoutConnection(t *testing.T) {
	tb := newTable("gh-conn-none")
	m := auth.NewHashMemo()
	for range 3 {
		connResolve(t, nil, m, tb, "gh-conn-none", "gh-conn-none")
	}
	if _, err := m.Resolve(context.Background(), "gh-conn-nonf", tb); err != auth.ErrBadKey {
		t.Fatalf("unknown key: %v, want ErrBadKey", err)
	}
}

// TestConnMemoConcurrent: requests of one connection at the same time
// (HTTP/2's streams), with keys of equal length in turn and one of them
// removed and put back meanwhile: every answer is the presented key's
// own (run with -race).
func TestConnMemoConcurrent(t *testing.T) {
	secrets := make([]string, 4)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("gh-conn-concurrent-%d", i)
	}
	tb := newTable(secrets...)
	m := auth.NewHashMemo()
	conn := new(auth.ConnMemo)
	resolveWhileChurning(t, tb, 6,
		func(g, i int) string { return secrets[(g+i/7)%len(secrets)] },
		func(int) string { return secrets[0] },
		func(s string) (*auth.Principal, error) { return m.ResolveOn(context.Background(), conn, s, tb) })
}
