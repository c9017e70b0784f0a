package auth

import "testing"

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
