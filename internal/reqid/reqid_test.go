package reqid

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

var shape = regexp.MustCompile(`^gh-[0-9a-f]{28}$`)

func TestShape(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 30, 0, 123_456_789, time.UTC)
	seen := map[string]bool{}
	for range 10000 {
		id := New(at)
		if !shape.MatchString(id) || len(id) != Len {
			t.Fatalf("id %q: want gh- and 28 hex digits (%d bytes)", id, Len)
		}
		ms, err := strconv.ParseUint(id[3:15], 16, 64)
		if err != nil || int64(ms) != at.UnixMilli() {
			t.Fatalf("id %q: time part %d, want %d", id, ms, at.UnixMilli())
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
}

// TestTimeOrder: ids of later milliseconds sort after earlier ones,
// whatever their random parts, across a carry of every hex digit.
func TestTimeOrder(t *testing.T) {
	base := time.UnixMilli(0xfff_ffff_ffff - 40)
	starts := []time.Time{time.UnixMilli(0), time.UnixMilli(15), time.UnixMilli(16), time.UnixMilli(255), time.UnixMilli(256),
		time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 0, 0, 0, 1_000_000, time.UTC), base, base.Add(40 * time.Millisecond)}
	for i := 1; i < len(starts); i++ {
		for range 100 {
			if a, b := New(starts[i-1]), New(starts[i]); a >= b {
				t.Fatalf("%q (at %v) sorts at or after %q (at %v)", a, starts[i-1], b, starts[i])
			}
		}
	}
}

func BenchmarkNew(b *testing.B) {
	at := time.Now()
	for b.Loop() {
		_ = New(at)
	}
}
