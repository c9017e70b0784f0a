package auth

import "testing"

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
	const secret = "gh-0123456789ABCDEFGHIJKLMNOPQRSTUV" // an admin-made key's length
	var h Hash
	for b.Loop() {
		h = HashKey(secret)
	}
	if h == (Hash{}) {
		b.Fatal("no hash")
	}
}
