package limit

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/quick"
)

// decimalEdges are the values where a decimal writer goes wrong if it
// does: each number of digits at its first and last value, the fast
// paths' bounds (10, 100, 1000), the chunk boundaries (10^8, 10^16) and
// the end of int64.
func decimalEdges() []int64 {
	edges := []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 9999, 10_000, 10_001,
		12_345_678, 99_999_999, 100_000_000, 100_000_001, 123_456_789,
		1_000_000_000_000, 999_999_999_999_999, 9_999_999_999_999_999, 10_000_000_000_000_000,
		10_000_000_000_000_001, math.MaxInt64 - 1, math.MaxInt64}
	for p := int64(10); p <= 1e18; p *= 10 {
		edges = append(edges, p-1, p, p+1, p*9/10, p/2)
	}
	return edges
}

func TestAppendInt(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want string
	}{{0, "0"}, {7, "7"}, {10, "10"}, {1000, "1000"}, {99_999_999, "99999999"}, {100_000_000, "100000000"},
		{1_000_000_000_000, "1000000000000"}, {10_000_000_000_000_000, "10000000000000000"},
		{-1, "-1"}, {-10, "-10"}, {-99_999_999, "-99999999"}, {-100_000_000, "-100000000"},
		{math.MinInt64, "-9223372036854775808"}, {math.MinInt64 + 1, "-9223372036854775807"},
		{math.MaxInt64, "9223372036854775807"}} {
		if got := string(AppendInt(nil, c.v)); got != c.want {
			t.Errorf("AppendInt(%d) = %q, want %q", c.v, got, c.want)
		}
	}
	for _, v := range decimalEdges() {
		checkAppendInt(t, v)
		checkAppendInt(t, -v)
	}
	checkAppendInt(t, math.MinInt64)
}

// checkAppendInt compares AppendInt with strconv for v, after a prefix
// and with no spare capacity, with exactly enough and with plenty, and
// checks that the bytes already in the slice stay as they were.
func checkAppendInt(t *testing.T, v int64) {
	t.Helper()
	want := strconv.AppendInt([]byte("x:"), v, 10)
	for _, extra := range []int{0, 1, 7, 8, 16, 24, 64} {
		b := make([]byte, 2, 2+extra)
		copy(b, "x:")
		if got := AppendInt(b, v); string(got) != string(want) {
			t.Fatalf("AppendInt(%q, %d) with %d spare = %q, want %q", "x:", v, extra, got, want)
		}
		if string(b) != "x:" {
			t.Fatalf("AppendInt(_, %d) changed the slice's bytes to %q", v, b)
		}
	}
}

// TestAppendIntSweep: every value below two million, and for each of
// the 10,000 values of a word's upper half of four digits, that half
// with several lower halves, so that each lane of digitWord meets every
// value it can hold beside others.
func TestAppendIntSweep(t *testing.T) {
	var got, want []byte
	check := func(v int64) {
		got, want = AppendInt(got[:0], v), strconv.AppendInt(want[:0], v, 10)
		if string(got) != string(want) {
			t.Fatalf("AppendInt(%d) = %q, want %q", v, got, want)
		}
	}
	for v := range int64(2_000_000) {
		check(v)
	}
	for hi := range int64(10_000) {
		for _, lo := range []int64{0, 1, 9999, hi, 9999 - hi, hi * 7919 % 10_000} {
			x := hi*10_000 + lo
			check(x)
			check(x*1e8 + 99_999_999 - x) // both chunks of a 16-digit number
			check(1e16 + x)               // the low chunk after a third
		}
	}
}

// TestAppendMatchesStrconv compares with strconv over random values of
// every length (quick's uniform values are almost all of 19 or 20
// digits, so they are also cut to a random number of digits).
func TestAppendMatchesStrconv(t *testing.T) {
	same := func(u uint64, digits uint8) bool {
		if n := digits % 21; n < 20 {
			u %= pow10(int(n))
		}
		v := int64(u)
		return string(AppendInt(nil, v)) == strconv.FormatInt(v, 10) &&
			string(AppendInt(nil, -v)) == strconv.FormatInt(-v, 10)
	}
	if err := quick.Check(same, &quick.Config{MaxCount: 200_000}); err != nil {
		t.Error(err)
	}
}

// pow10 is 10^n for n up to 19.
func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// TestMicrosAppend: Micros.Append after bytes already in the slice,
// with and without spare capacity, against the dollars and decimals
// formatted by strconv, at the edges and over random amounts.
func TestMicrosAppend(t *testing.T) {
	want := func(m Micros) string {
		u, sign := uint64(m), ""
		if m < 0 {
			u, sign = -u, "-"
		}
		frac := strconv.FormatUint(u%1e6+1e6, 10)[1:] // six digits, zeros kept
		return "z" + sign + strconv.FormatUint(u/1e6, 10) + "." + frac
	}
	check := func(m Micros) {
		for _, extra := range []int{0, 3, 8, 32} {
			b := append(make([]byte, 0, 1+extra), 'z')
			if got := string(m.Append(b)); got != want(m) {
				t.Fatalf("Micros(%d).Append with %d spare = %q, want %q", int64(m), extra, got, want(m))
			}
		}
	}
	for _, v := range decimalEdges() {
		check(Micros(v))
		check(-Micros(v))
	}
	for _, m := range []Micros{math.MinInt64, math.MinInt64 + 1, 999_999_998_765_432, 1_234} {
		check(m)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(Micros(rng.Uint64() % pow10(rng.IntN(20))))
		check(Micros(rng.Uint64()))
	}
}

// BenchmarkAppendInt: the figures of a budgeted answer's headers and
// log line (a 13- and a 9-digit remainder, a reset in milliseconds, a
// status, token counts), by AppendInt and by strconv for comparison.
func BenchmarkAppendInt(b *testing.B) {
	figures := []int64{999_999_999_187, 99_999_187, 600, 200, 12, 9}
	b.Run("AppendInt", func(b *testing.B) {
		buf := make([]byte, 0, 128)
		b.ReportAllocs()
		for b.Loop() {
			buf = buf[:0]
			for _, v := range figures {
				buf = AppendInt(buf, v)
			}
		}
	})
	b.Run("strconv", func(b *testing.B) {
		buf := make([]byte, 0, 128)
		b.ReportAllocs()
		for b.Loop() {
			buf = buf[:0]
			for _, v := range figures {
				buf = strconv.AppendInt(buf, v, 10)
			}
		}
	})
}
