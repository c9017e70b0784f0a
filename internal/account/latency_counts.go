package account

import "strconv"

// LatencyCounts counts durations in the latency buckets as Histogram
// does, for a writer that adds many samples and then encodes them once:
// a store's rollup, which adds every record of a batch. It keeps a count
// for every bucket, so a sample costs its bucket and an increment, where
// Histogram's sorted list of the buckets in use costs a search and, for
// a bucket between two in use (latencies come in no order), an insert.
// The zero value is empty.
type LatencyCounts struct {
	n      []int64 // by bucket; nil until the first sample
	lo, hi int     // the buckets in use lie in [lo, hi], once n is made
}

// Add counts one duration in milliseconds, in LatencyBucket's bucket.
func (c *LatencyCounts) Add(ms float64) {
	b := LatencyBucket(ms)
	if c.n == nil {
		c.n = make([]int64, LatencyBuckets())
		c.lo, c.hi = b, b
	}
	c.lo, c.hi = min(c.lo, b), max(c.hi, b)
	c.n[b]++
}

// AppendJSON appends c as Histogram.AppendJSON appends a histogram of
// the same samples: {"40":3,"41":1}, {} when empty. Only the buckets
// between the lowest and the highest in use are looked at: a batch's
// latencies mostly lie within a few buckets of each other.
func (c *LatencyCounts) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	if c.n != nil {
		first := true
		for b := c.lo; b <= c.hi; b++ {
			if c.n[b] == 0 {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, int64(b), 10)
			dst = append(dst, '"', ':')
			dst = strconv.AppendInt(dst, c.n[b], 10)
		}
	}
	return append(dst, '}')
}
