package account

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Latency histograms: the usage API answers latency and time-to-first-
// token percentiles per row, and a row may be the sum of rollup rows and
// of records read at the window's edges. Percentiles do not add up;
// counts in fixed buckets do. So every store counts milliseconds in the
// same buckets — in its hourly rollup and, for the records it reads
// directly, in SQL — and the rows' histograms are merged here before a
// percentile is read off them.

// latencyMantissas are the R20 preferred numbers (ISO 3): 20 bounds a
// decade, each at most 14.3% (1.40 to 1.60) and usually 12% above the
// one before, round enough to read in SQL. Linear interpolation inside a
// bucket then puts a percentile within that bucket's width of the exact
// one, and closer for any row with more than a handful of samples.
var latencyMantissas = [...]int64{100, 112, 125, 140, 160, 180, 200, 224, 250, 280, 315, 355, 400, 450, 500, 560, 630, 710, 800, 900}

// maxLatencyMS is the last bound: ten minutes, beyond any upstream
// timeout worth configuring. Slower samples share the last bucket, whose
// percentile reads as this bound.
const maxLatencyMS = 600_000

// latencyBounds are the buckets' lower bounds in milliseconds, from 1 ms
// (bucket 0 holds [0, 1)) to maxLatencyMS: bucket i holds
// [latencyBounds[i-1], latencyBounds[i]), and the last holds everything
// from maxLatencyMS up. Each bound is one correctly rounded division of
// two integers, so it is the float64 its decimal spelling parses to, in
// Go, SQLite and PostgreSQL alike. Read-only.
var latencyBounds = func() []float64 {
	var bs []float64
	for scale := int64(1); ; scale *= 10 {
		for _, m := range latencyMantissas {
			b := float64(m*scale) / 100 // scale ≥ 1: exact below 2^53
			if b >= maxLatencyMS {
				return append(bs, maxLatencyMS)
			}
			bs = append(bs, b)
		}
	}
}()

// LatencyBounds returns a copy of the buckets' lower bounds in
// milliseconds: bucket 0 holds [0, bounds[0]), bucket i holds
// [bounds[i-1], bounds[i]), bucket len(bounds) everything from the last
// bound up. PostgreSQL's width_bucket numbers buckets the same way.
func LatencyBounds() []float64 { return slices.Clone(latencyBounds) }

// LatencyBuckets is the number of buckets.
func LatencyBuckets() int { return len(latencyBounds) + 1 }

// LatencyBucket is the bucket of a duration in milliseconds. A negative
// or NaN duration (none is stored: the stores write NaN as 0) counts as 0.
//
// Every record's latency is bucketed as it is written, so the search is
// short: an R20 series has six bounds an octave (20·log10 2 = 6.02), so
// that exactly 6e+1 bounds are ≤ 2^e for each binary exponent e the
// bounds span (TestLatencyBucketOctaves), and the bounds ≤ ms are found
// by at most six steps up from there, where a binary search over all of
// them takes seven halvings.
func LatencyBucket(ms float64) int {
	if !(ms >= latencyBounds[0]) {
		return 0
	}
	if ms >= maxLatencyMS {
		return len(latencyBounds)
	}
	e := int(math.Float64bits(ms)>>52) - 1023 // ⌊log2 ms⌋, 0 to 19: 1 ≤ ms < 2^20
	i := 6*e + 1
	for latencyBounds[i] <= ms { // ends at the last bound, maxLatencyMS, if not before
		i++
	}
	return i
}

// LatencyBucketRange is the interval [lo, hi) bucket b holds; hi is +Inf
// for the last bucket.
func LatencyBucketRange(b int) (lo, hi float64) {
	switch {
	case b <= 0:
		return 0, latencyBounds[0]
	case b >= len(latencyBounds):
		return latencyBounds[len(latencyBounds)-1], math.Inf(1)
	}
	return latencyBounds[b-1], latencyBounds[b]
}

// LatencyBucketSQL is an SQL expression for the bucket of the numeric
// column col: nested CASEs that halve the bounds at each level, so a row
// costs seven comparisons rather than a hundred. For SQL engines without
// PostgreSQL's width_bucket; it numbers buckets as LatencyBucket does
// (col is never NULL or NaN in the stores).
func LatencyBucketSQL(col string) string {
	var b strings.Builder
	bucketSQL(&b, col, 0, len(latencyBounds))
	return b.String()
}

// bucketSQL writes the bucket of col, known to be one of lo..hi.
func bucketSQL(b *strings.Builder, col string, lo, hi int) {
	if lo == hi {
		b.WriteString(strconv.Itoa(lo))
		return
	}
	mid := lo + (hi-lo+1)/2 // buckets lo..mid-1 lie below latencyBounds[mid-1]
	b.WriteString("CASE WHEN " + col + " < " + strconv.FormatFloat(latencyBounds[mid-1], 'g', -1, 64) + " THEN ")
	bucketSQL(b, col, lo, mid-1)
	b.WriteString(" ELSE ")
	bucketSQL(b, col, mid, hi)
	b.WriteString(" END")
}

// Histogram counts durations in the latency buckets. The zero value is
// empty. It keeps only the buckets that hold a sample, so a row of a
// usage answer with a few samples stays small.
type Histogram struct {
	buckets []bucketCount // by bucket, ascending; counts > 0
}

type bucketCount struct {
	bucket int
	count  int64
}

// Add counts one duration in milliseconds.
func (h *Histogram) Add(ms float64) { h.AddCount(LatencyBucket(ms), 1) }

// AddCount adds n samples to bucket b (a bucket a store read back);
// buckets out of range count in the first or the last.
func (h *Histogram) AddCount(b int, n int64) {
	if n <= 0 {
		return
	}
	b = min(max(b, 0), len(latencyBounds))
	k := len(h.buckets)
	switch {
	case k == 0 || h.buckets[k-1].bucket < b: // buckets mostly come in order
		h.buckets = append(h.buckets, bucketCount{b, n})
		return
	case h.buckets[k-1].bucket == b: // a batch's latencies often repeat the last
		h.buckets[k-1].count += n
		return
	}
	// The first bucket at or after b, searched by hand: the generic
	// search's comparison is a call per step.
	i, j := 0, k-1 // h.buckets[k-1].bucket > b
	for i < j {
		mid := int(uint(i+j) >> 1)
		if h.buckets[mid].bucket < b {
			i = mid + 1
		} else {
			j = mid
		}
	}
	if h.buckets[i].bucket == b {
		h.buckets[i].count += n
		return
	}
	h.buckets = slices.Insert(h.buckets, i, bucketCount{b, n})
}

// Merge adds o's counts to h. o is left as it was.
func (h *Histogram) Merge(o Histogram) {
	if len(h.buckets) == 0 {
		h.buckets = slices.Clone(o.buckets)
		return
	}
	for _, c := range o.buckets {
		h.AddCount(c.bucket, c.count)
	}
}

// Count is the number of samples.
func (h Histogram) Count() int64 {
	var n int64
	for _, c := range h.buckets {
		n += c.count
	}
	return n
}

// Buckets yields the buckets that hold samples, ascending, with their
// counts: what a store writes to its rollup.
func (h Histogram) Buckets() iter.Seq2[int, int64] {
	return func(yield func(int, int64) bool) {
		for _, c := range h.buckets {
			if !yield(c.bucket, c.count) {
				return
			}
		}
	}
}

// AppendJSON appends h as the rollup stores it: a JSON object of the
// non-empty buckets' counts, keyed by bucket number ({"40":3,"41":1};
// {} when empty), which SQLite's and PostgreSQL's JSON functions can
// merge.
func (h Histogram) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, c := range h.buckets {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, int64(c.bucket), 10)
		dst = append(dst, '"', ':')
		dst = strconv.AppendInt(dst, c.count, 10)
	}
	return append(dst, '}')
}

// AddJSON adds the counts of AppendJSON's objects in s to h: one, or
// several run together as a store's string_agg or group_concat joins
// them ({"40":3}{"40":1,"52":2}), spaces and all. Only the numbers are
// read, as bucket and count pairs, so this is no general JSON parser: it
// refuses anything else than digits among the quotes, colons, commas,
// braces and spaces.
func (h *Histogram) AddJSON(s string) error {
	var pair [2]int64
	n := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			var v int64
			for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
				if v > (math.MaxInt64-9)/10 {
					return fmt.Errorf("latency histogram %q: a number out of range", s)
				}
				v = v*10 + int64(s[i]-'0')
			}
			pair[n%2] = v
			if n++; n%2 == 0 {
				h.AddCount(int(min(pair[0], int64(len(latencyBounds)))), pair[1])
			}
		case c == '{' || c == '}' || c == '"' || c == ':' || c == ',' || c == ' ':
			i++
		default:
			return fmt.Errorf("latency histogram %q: unexpected %q", s, c)
		}
	}
	if n%2 != 0 {
		return fmt.Errorf("latency histogram %q: a bucket without a count", s)
	}
	return nil
}

// Quantile estimates the q-quantile (0 < q ≤ 1) of the samples: it
// finds the bucket holding the sample of rank q·n (the exact nearest-rank
// percentile lies in it) and interpolates linearly inside the bucket, as
// if its samples were spread evenly. A rank in the last, unbounded bucket
// reads as its lower bound. ok is false when there are no samples.
func (h Histogram) Quantile(q float64) (ms float64, ok bool) {
	n := h.Count()
	if n == 0 {
		return 0, false
	}
	rank := q * float64(n)
	var below int64
	for i, c := range h.buckets {
		if float64(below+c.count) >= rank || i == len(h.buckets)-1 {
			lo, hi := LatencyBucketRange(c.bucket)
			if math.IsInf(hi, 1) {
				return lo, true
			}
			f := min(max((rank-float64(below))/float64(c.count), 0), 1)
			return lo + (hi-lo)*f, true
		}
		below += c.count
	}
	return 0, false // not reached: n > 0
}
