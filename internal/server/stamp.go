package server

import (
	"sync/atomic"
	"time"
)

// lineStamps writes the time of request log lines as slog's JSON handler
// does (time.RFC3339Nano). The date, the clock and the zone change once
// a second, and every line of that second shares them: kept as text, the
// calendar arithmetic and the six number formats behind them run once a
// second instead of once a line, and a line's stamp is two copies and
// its nanoseconds.
type lineStamps struct{ cur atomic.Pointer[secondStamp] }

// secondStamp is the text of one second in one location.
type secondStamp struct {
	sec  int64
	loc  *time.Location
	head string // "2006-01-02T15:04:05"
	zone string // "Z" or "-07:00"
}

// append appends t as t.AppendFormat(b, time.RFC3339Nano) would.
func (c *lineStamps) append(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	st := c.cur.Load()
	if st == nil || st.sec != sec || st.loc != loc {
		if st = newSecondStamp(t); st == nil {
			return t.AppendFormat(b, time.RFC3339Nano)
		}
		c.cur.Store(st)
	}
	b = append(b, st.head...)
	b = appendNanos(b, t.Nanosecond())
	return append(b, st.zone...)
}

// newSecondStamp cuts the stamp of t's second out of the standard
// library's own formatting of its first instant, so that the parts are
// its very text; nil for a year outside 0-9999, which RFC 3339 cannot
// hold and the caller leaves to the standard library.
func newSecondStamp(t time.Time) *secondStamp {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil
	}
	whole := t.Truncate(time.Second)
	if whole.Unix() != t.Unix() { // before 1 AD Truncate rounds another way
		return nil
	}
	s := whole.Format(time.RFC3339Nano) // no fraction: the zone follows the seconds
	const head = len("2006-01-02T15:04:05")
	return &secondStamp{sec: t.Unix(), loc: t.Location(), head: s[:head], zone: s[head:]}
}

// appendNanos appends ns (0-999,999,999) as RFC3339Nano's fraction: a
// point and nine digits with the trailing zeros dropped, nothing at all
// for zero. The first digit, then four pairs from a table, each at a
// place known when compiled: a digit at a time took nine divisions and
// a loop of nine turns a line.
func appendNanos(b []byte, ns int) []byte {
	if ns == 0 {
		return b
	}
	var d [10]byte
	u := uint(ns)
	d[0], d[1] = '.', byte('0'+u/1e8%10)
	hi, lo := u/1e4%1e4, u%1e4
	putPair(&d, 2, hi/100)
	putPair(&d, 4, hi%100)
	putPair(&d, 6, lo/100)
	putPair(&d, 8, lo%100)
	n := 10
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

// putPair writes v (0-99) in two digits at d[i:i+2].
func putPair(d *[10]byte, i int, v uint) {
	v = 2 * (v % 100)
	d[i], d[i+1] = digitPairs[v], digitPairs[v+1]
}

// digitPairs are the two-digit decimals 00 to 99, one after another.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
