package h1

import "bufio"

// A header block is written field by field into the writer's free buffer
// (bufio.Writer.AvailableBuffer) and handed over in one Write, instead of
// four WriteStrings a line: a limited key's answer carries about 17
// fields, and the per-call work was most of what writing them cost.

// blockWriter gathers header lines in bw's free space.
type blockWriter struct {
	bw *bufio.Writer
	b  []byte
}

func newBlockWriter(bw *bufio.Writer) blockWriter {
	return blockWriter{bw: bw, b: bw.AvailableBuffer()}
}

// room makes n bytes of room, handing over what is gathered if they do
// not fit; a line longer than the whole buffer is gathered in memory of
// its own (append grows it), which bufio writes through.
func (w *blockWriter) room(n int) {
	if len(w.b)+n > cap(w.b) && len(w.b) > 0 {
		w.flush()
	}
}

// flush hands what is gathered to the writer.
func (w *blockWriter) flush() {
	if len(w.b) > 0 {
		_, _ = w.bw.Write(w.b)
	}
	w.b = w.bw.AvailableBuffer()
}

// str gathers s as it is (the engine's own, already valid, text).
func (w *blockWriter) str(s string) {
	w.room(len(s))
	w.b = append(w.b, s...)
}

// bytes gathers p as it is (lines the handler vouched for, FieldWriter).
func (w *blockWriter) bytes(p []byte) {
	w.room(len(p))
	w.b = append(w.b, p...)
}

// field gathers one line per value of the handler's field k. A name that
// is not a plain token is left out (a name is the handler's, but a CR or
// colon in one would split the header block); a value's control bytes
// but HTAB become spaces, so no value can end its line early.
func (w *blockWriter) field(k string, vv []string) {
	if !plainName(k) {
		return
	}
	for _, v := range vv {
		w.room(len(k) + len(v) + 4)
		b := append(w.b, k...)
		b = append(b, ':', ' ')
		if clean(v) {
			b = append(b, v...)
		} else {
			b = appendSanitised(b, v)
		}
		w.b = append(b, '\r', '\n')
	}
}

// writeField writes the lines of one field on their own (a 1xx response's,
// a trailer's, the Connection field commit writes).
func writeField(bw *bufio.Writer, k string, vv []string) {
	w := newBlockWriter(bw)
	w.field(k, vv)
	w.flush()
}

// The checks below test eight bytes at a time (a name or value is mostly
// letters, digits and dashes) and look at single bytes only in a word the
// fast test refuses and in the last few bytes; nameByte and valueByte are
// the rules, the word tests their exact equivalent on a word (held by
// TestWordChecks at every position).

const ones, highs = 0x0101010101010101, 0x8080808080808080

// below reports whether some byte of v is below n (n ≤ 0x80): v − n…
// borrows into a byte's top bit only where that byte is below n, or
// where a lower byte already was; ^v leaves out bytes with the top bit.
func below(v uint64, n byte) bool {
	return (v-ones*uint64(n))&^v&highs != 0
}

// atLeast7f reports whether some byte of v is 0x7f or above: adding one
// to each byte sets the top bit of a 0x7f, and carries out of a byte only
// from 0xff, which has its top bit already.
func atLeast7f(v uint64) bool {
	return ((v+ones)|v)&highs != 0
}

// hasByte reports whether some byte of v is c.
func hasByte(v uint64, c byte) bool {
	x := v ^ ones*uint64(c)
	return (x-ones)&^x&highs != 0
}

// nameWord reports whether all eight bytes of v may be in a field name.
func nameWord(v uint64) bool {
	return !below(v, '!') && !atLeast7f(v) && !hasByte(v, ':')
}

// valueWord reports whether all eight bytes of v are printable ASCII, which
// a value carries as it is (HTAB and obs-text also do, checked by byte).
func valueWord(v uint64) bool {
	return !below(v, ' ') && !atLeast7f(v)
}

func nameByte(c byte) bool  { return c > ' ' && c != ':' && c < 0x7f }
func valueByte(c byte) bool { return (c >= ' ' || c == '\t') && c != 0x7f }

// word reads the eight bytes of s (at least eight long) as one
// little-endian word: the compiler makes it a single load.
func word(s string) uint64 {
	s = s[:8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainName reports whether k is a header name that cannot break the
// block: not empty, no control bytes, spaces, colons, DEL or non-ASCII.
func plainName(k string) bool {
	if k == "" {
		return false
	}
	if len(k) < 8 {
		for i := 0; i < len(k); i++ {
			if !nameByte(k[i]) {
				return false
			}
		}
		return true
	}
	// Whole words, the last one ending at the end (it may overlap the
	// one before): no byte loop for the tail.
	for i := 0; i+8 < len(k); i += 8 {
		if !nameWord(word(k[i:])) {
			return false
		}
	}
	return nameWord(word(k[len(k)-8:]))
}

// clean reports whether v can go out as it is: no control bytes but HTAB,
// no DEL.
func clean(v string) bool {
	if len(v) < 8 {
		return cleanBytes(v)
	}
	// Whole words, the last one ending at the end, as plainName; a word
	// the fast test refuses (HTAB, obs-text) is looked at byte by byte.
	for i := 0; i+8 < len(v); i += 8 {
		if !valueWord(word(v[i:])) && !cleanBytes(v[i:i+8]) {
			return false
		}
	}
	last := v[len(v)-8:]
	return valueWord(word(last)) || cleanBytes(last)
}

func cleanBytes(v string) bool {
	for i := 0; i < len(v); i++ {
		if !valueByte(v[i]) {
			return false
		}
	}
	return true
}

// appendSanitised appends v with each byte clean refuses turned into a
// space.
func appendSanitised(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !valueByte(c) {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}
