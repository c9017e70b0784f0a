package sqlite

import (
	"hash/fnv"
	"testing"
)

// TestIDHashIsFNV1a: idHash, stored in every batch row, is the 32-bit
// FNV-1a of the id for every length around its four-byte turns (rows
// written before and after any change of its loop must agree).
func TestIDHashIsFNV1a(t *testing.T) {
	id := "req-01JD8Y7ZQ4K3N2M1P0R9S8T7V6-é"
	for n := 0; n <= len(id); n++ {
		f := fnv.New32a()
		f.Write([]byte(id[:n]))
		if got, want := idHash(id[:n]), f.Sum32(); got != want {
			t.Errorf("idHash(%q) = %#x, FNV-1a %#x", id[:n], got, want)
		}
	}
}

func BenchmarkIDHash(b *testing.B) {
	ids := []string{"chatcmpl-01JD8Y7ZQ4K3N2M1P0R9S8T7V6", "req-3f9a1c2e7b5d4a60", "01JD8Y7ZQ4K3N2M1P0R9S8T7V6"}
	var h uint32
	for b.Loop() {
		for _, id := range ids {
			h += idHash(id)
		}
	}
	_ = h
}
