package limit

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// The decimal writers here serve every figure a budgeted answer carries:
// the x-ratelimit headers' remaining counts (a 9- and a 13-digit number
// for large limits), the reset times, the request log line's statuses
// and token counts, and Micros. They live in limit because it is the
// lowest package (standard library only) that every writer of those
// figures imports.
//
// strconv writes two digits a step, each step a division, a table
// look-up and two byte stores, and then copies the digits it wrote into
// an array onto the slice. Here eight digits are made at once in the
// eight bytes of one word (digitWord: four multiplications, each
// splitting all the lanes of the word together), and the word is stored
// straight into the slice's spare capacity, shifted so that its leading
// zeros fall off its end: no loop, no table, no copy.

// AppendInt appends v in decimal, as strconv.AppendInt(b, v, 10) does.
func AppendInt(b []byte, v int64) []byte {
	if v < 0 {
		// -v wraps for math.MinInt64, whose magnitude uint64 still holds.
		return AppendUint(append(b, '-'), -uint64(v))
	}
	return AppendUint(b, uint64(v))
}

// AppendUint appends u in decimal, as strconv.AppendUint(b, u, 10) does.
func AppendUint(b []byte, u uint64) []byte {
	switch {
	case u < 1e8:
		b = spare(b, 8)
		return putLeading(b, u)
	case u < 1e16:
		b = spare(b, 16)
		return putEight(putLeading(b, u/1e8), u%1e8)
	}
	b = spare(b, 24)
	low := u % 1e16
	return putEight(putEight(putLeading(b, u/1e16), low/1e8), low%1e8)
}

// digitWord spreads x (below 10^8) into the eight bytes of a word, one
// decimal digit (0-9) a byte, the most significant in the lowest byte
// (first in memory when stored little-endian), leading zeros included.
// The number is split in halves of four digits (two 32-bit lanes), each
// half in pairs (four 16-bit lanes), each pair in digits (eight bytes);
// each split divides every lane at once by multiplying by a reciprocal
// and shifting, exact for the lanes' ranges (x*5243>>19 is x/100 below
// 43,699; x*103>>10 is x/10 below 179), and no lane's product reaches
// the next lane.
func digitWord(x uint64) uint64 {
	v := x/1e4 | x%1e4<<32
	hundreds := v * 5243 >> 19 & 0x0000_007f_0000_007f
	v = hundreds | (v-hundreds*100)<<16
	tens := v * 103 >> 10 & 0x000f_000f_000f_000f
	return tens | (v-tens*10)<<8
}

// asciiDigits turns digitWord's bytes into the characters '0'-'9'.
const asciiDigits = 0x3030_3030_3030_3030

// putLeading writes x (below 10^8) with no leading zeros ("0" for zero)
// into b's spare capacity, which must hold 8 bytes, and returns b
// lengthened by its digits.
func putLeading(b []byte, x uint64) []byte {
	d := digitWord(x)
	// The leading zero digits are the word's low zero bytes; the top bit
	// (never set by a digit) keeps the last digit of zero.
	zeros := bits.TrailingZeros64(d|1<<63) / 8
	return putWord(b, (d+asciiDigits)>>(8*zeros), 8-zeros)
}

// putEight writes x (below 10^8) as eight digits, leading zeros
// included, into b's spare capacity, which must hold 8 bytes.
func putEight(b []byte, x uint64) []byte {
	return putWord(b, digitWord(x)+asciiDigits, 8)
}

// putWord stores the word w little-endian just past b's end, in its
// spare capacity, which must hold 8 bytes, and returns b lengthened by
// the first n of them; the rest stay beyond its length, where the next
// append overwrites them.
func putWord(b []byte, w uint64, n int) []byte {
	end := len(b)
	binary.LittleEndian.PutUint64(b[end:end+8], w)
	return b[:end+n]
}

// spare returns b with room for n more bytes past its length.
func spare(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		return slices.Grow(b, n)
	}
	return b
}
