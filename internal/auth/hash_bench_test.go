package auth

import (
	"context"
	"testing"
)

const benchSecret = "gh-0123456789ABCDEFGHIJKLMNOPQRSTUV" // an admin-made key's length

// BenchmarkHashKey is the SHA-256 every keyed request pays once (one
// block: a key is shorter than 56 bytes). Run it twice to see what the
// CPU's SHA extensions are worth, which valgrind's instruction counts
// cannot show (valgrind does not offer them, so Go runs its AVX2 code
// there):
//
//	go test -run '^$' -bench HashKey ./internal/auth/
//	GODEBUG=cpu.sha=off go test -run '^$' -bench HashKey ./internal/auth/
//
// (golang.org/x/sys/cpu, linked in too, warns that it does not know
// "sha"; the standard library's crypto reads the setting.)
func BenchmarkHashKey(b *testing.B) {
	var h Hash
	for b.Loop() {
		h = HashKey(benchSecret)
	}
	if h == (Hash{}) {
		b.Fatal("no hash")
	}
}

// BenchmarkHashMemo is what a memoized key's request pays instead of
// BenchmarkHashKey: the secret's SipHash and a read of the memo's shard.
// Compare the two in one run, with and without the SHA extensions:
//
//	go test -run '^$' -bench 'HashKey|HashMemo' ./internal/auth/
//	GODEBUG=cpu.sha=off go test -run '^$' -bench 'HashKey|HashMemo' ./internal/auth/
func BenchmarkHashMemo(b *testing.B) {
	m := NewHashMemo()
	tag := memoTag(sipHash128(m.key, benchSecret))
	m.shard(tag).put(tag, HashKey(benchSecret))
	var h Hash
	known := false
	for b.Loop() {
		_, h, known = m.lookup(benchSecret)
	}
	if !known || h != HashKey(benchSecret) {
		b.Fatal("not memoized")
	}
}

// BenchmarkSipHash128 is the memo's PRF alone, on a key's length.
func BenchmarkSipHash128(b *testing.B) {
	k := sipKey{1, 2}
	var t [16]byte
	for b.Loop() {
		t = sipHash128(k, benchSecret)
	}
	if t == ([16]byte{}) {
		b.Fatal("no tag")
	}
}

// BenchmarkResolveOn is a memoized key's resolution (the resolver's own
// work aside) on a connection: the connection's last key again ("same",
// what a client's keep-alive connection sends), two keys in turn
// ("alternating", a shared proxy's connection: each request a miss of
// the connection's entry, then the memo's look-up and a new entry), and
// with no connection ("none", the memo alone, as before ConnMemo):
//
//	go test -run '^$' -bench ResolveOn -benchmem ./internal/auth/
func BenchmarkResolveOn(b *testing.B) {
	const other = "gh-ABCDEFGHIJKLMNOPQRSTUV0123456789" // benchSecret's length
	for _, c := range []struct {
		name    string
		conn    *ConnMemo
		secrets []string
	}{
		{"same", new(ConnMemo), []string{benchSecret}},
		{"alternating", new(ConnMemo), []string{benchSecret, other}},
		{"none", nil, []string{benchSecret}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := NewHashMemo()
			r := &fixedResolver{p: &Principal{KeyID: "k"}}
			ctx := b.Context()
			for _, s := range c.secrets {
				if _, err := m.ResolveOn(ctx, c.conn, s, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := m.ResolveOn(ctx, c.conn, c.secrets[i%len(c.secrets)], r); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if r.last != HashKey(c.secrets[(i-1)%len(c.secrets)]) {
				b.Fatal("the last request resolved by another hash")
			}
		})
	}
}

// fixedResolver answers every hash with one principal, keeping the last
// hash, at no cost of its own to a benchmark.
type fixedResolver struct {
	p    *Principal
	last Hash
}

func (r *fixedResolver) ResolveHash(_ context.Context, h Hash) (*Principal, error) {
	r.last = h
	return r.p, nil
}
