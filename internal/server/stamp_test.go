package server

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestLineStamps: a stamp is byte for byte time.RFC3339Nano's, the first
// of its second and every later one (the kept text), across zones,
// fractions, a change of zone within one second and years RFC 3339
// cannot hold.
func TestLineStamps(t *testing.T) {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -7*3600),
		time.FixedZone("", -30), time.FixedZone("", 9*60+21)}
	nanos := []int{0, 1, 10, 100_000, 120_000_000, 123_456_789, 500_000_000, 999_999_999, 0}
	var c lineStamps
	for _, base := range []time.Time{
		time.Date(2026, 11, 28, 0, 52, 13, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 6, 1, 12, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
		time.Unix(-1, 0),
	} {
		for _, loc := range zones {
			for _, ns := range nanos {
				tm := base.Add(time.Duration(ns)).In(loc)
				if got, want := string(c.append([]byte("x"), tm)), "x"+tm.Format(time.RFC3339Nano); got != want {
					t.Errorf("%v (%s): %s, want %s", tm, loc, got, want)
				}
			}
		}
	}
	// The clock's own times, monotonic reading and all, twice in a row.
	now := time.Now()
	for _, tm := range []time.Time{now, now.Add(time.Nanosecond), now.Add(time.Second)} {
		if got, want := string(c.append(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
	// Within a second the kept text is used: no allocation.
	tm := time.Date(2026, 11, 28, 0, 52, 13, 5, time.UTC)
	buf := c.append(nil, tm)
	if n := testing.AllocsPerRun(100, func() { buf = c.append(buf[:0], tm.Add(time.Microsecond)) }); n != 0 {
		t.Errorf("%v allocations a stamp within one second, want 0", n)
	}
}

// TestAppendNanos: the fraction is RFC3339Nano's, at every digit's
// place: each single digit 1-9 at each of the nine places, every value
// below 100,000 and random ones, each also with its low digits cut to
// zeros (trailing zeros dropped).
func TestAppendNanos(t *testing.T) {
	for ns, want := range map[int]string{0: "", 1: ".000000001", 10: ".00000001", 120_000_000: ".12", 999_999_999: ".999999999", 100_000_000: ".1"} {
		if got := string(appendNanos(nil, ns)); got != want {
			t.Errorf("%d: %q, want %q", ns, got, want)
		}
	}
	check := func(ns int) {
		s := time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
		want := strings.TrimSuffix(s[len("2006-01-02T15:04:05"):], "Z")
		if got := string(appendNanos([]byte{}, ns)); got != want {
			t.Fatalf("%d: %q, want %q", ns, got, want)
		}
	}
	for place := 1; place < 1e9; place *= 10 {
		for digit := 1; digit <= 9; digit++ {
			check(digit * place)
		}
	}
	for ns := range 100_000 {
		check(ns)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		ns := r.IntN(1e9)
		check(ns)
		for cut := 10; cut < 1e9; cut *= 10 {
			check(ns - ns%cut)
		}
	}
}

// BenchmarkAppendNanos: a line's fraction, for instruction counts
// under callgrind (scripts/bench-instructions counts the whole path).
func BenchmarkAppendNanos(b *testing.B) {
	buf := make([]byte, 0, 16)
	ns := 123_456_789
	for range b.N {
		buf = appendNanos(buf[:0], ns)
		ns = (ns + 7_654_321) % 1e9
	}
}
