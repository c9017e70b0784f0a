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
// an array onto the slice. Here, from a thousand up, eight digits are
// made at once in the eight bytes of one word (digitWord: four
// multiplications, each splitting all the lanes of the word together),
// and the word is stored straight into the slice's spare capacity,
// shifted so that its leading zeros fall off its end: no loop, no table,
// no copy.

// AppendInt appends v in decimal, as strconv.AppendInt(b, v, 10) does.
// Below a thousand (a status, most token counts, a reset in
// milliseconds) the digits are appended as they are, with fewer
// instructions than making a word takes; below 10^8 the one word is
// written here, not by a call.
func AppendInt(b []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		// -u wraps for math.MinInt64, whose magnitude uint64 still holds.
		b, u = append(b, '-'), -u
	}
	switch {
	case u < 10:
		return append(b, byte('0'+u))
	case u < 100:
		return append(b, digitPairs[2*u], digitPairs[2*u+1])
	case u < 1000:
		pair := 2 * (u % 100)
		return append(b, byte('0'+u/100), digitPairs[pair], digitPairs[pair+1])
	case u >= 1e8:
		return appendLong(b, u)
	}
	d := digitWord(u)
	zeros := leadingZeros(d)
	return putWord(spare(b, 8), (d+asciiDigits)>>(8*zeros), 8-zeros)
}

// digitPairs holds 00 to 99, two bytes each.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// appendLong appends u of nine digits or more (math.MinInt64's magnitude
// included): the digits above the last eight with no leading zeros (in
// two words above 10^16), the last eight in full.
func appendLong(b []byte, u uint64) []byte {
	b = spare(b, 24)
	high, low := u/1e8, u%1e8
	if high < 1e8 {
		d := digitWord(high)
		zeros := leadingZeros(d)
		b = putWord(b, (d+asciiDigits)>>(8*zeros), 8-zeros)
	} else {
		b = putLeading(b, high/1e8)
		b = putEight(b, high%1e8)
	}
	return putEight(b, low)
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
	zeros := leadingZeros(d)
	return putWord(b, (d+asciiDigits)>>(8*zeros), 8-zeros)
}

// leadingZeros is the number of leading zero digits in digitWord's d,
// its low zero bytes, up to 7: the top bit (never set by a digit) keeps
// the last digit of zero.
func leadingZeros(d uint64) int { return bits.TrailingZeros64(d|1<<63) / 8 }

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
