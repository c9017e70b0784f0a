package auth

import (
	"encoding/binary"
	"math/bits"
)

// sipKey is a SipHash key: the 128-bit key's two little-endian halves.
type sipKey struct{ k0, k1 uint64 }

// sipKeyOf splits a 16-byte key as SipHash reads it.
func sipKeyOf(raw [16]byte) sipKey {
	return sipKey{binary.LittleEndian.Uint64(raw[:8]), binary.LittleEndian.Uint64(raw[8:])}
}

// The initial state's constants (SipHash paper, §2: "somepseudorandomlygeneratedbytes").
const (
	sipInit0 = 0x736f6d6570736575
	sipInit1 = 0x646f72616e646f6d
	sipInit2 = 0x6c7967656e657261
	sipInit3 = 0x7465646279746573
)

// sipRound is one SipRound, the ARX network of the paper. It takes and
// returns the four words by value so that, inlined, they stay in
// registers (a method on a struct kept them in memory: about three times
// slower).
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13) ^ v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16) ^ v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21) ^ v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17) ^ v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// sipHash128 is SipHash-2-4 with a 128-bit output (the variant the
// authors' reference code builds with 16-byte output: 0xee folded into
// v1 at the start and into v2 before finalization, then 0xdd into v1
// for the second half). It takes a string so that a secret is read where
// it lies, with no copy.
func sipHash128(k sipKey, msg string) [16]byte {
	v0, v1, v2, v3 := k.k0^sipInit0, k.k1^sipInit1^0xee, k.k0^sipInit2, k.k1^sipInit3
	n := len(msg)
	for ; len(msg) >= 8; msg = msg[8:] {
		m := uint64(msg[0]) | uint64(msg[1])<<8 | uint64(msg[2])<<16 | uint64(msg[3])<<24 |
			uint64(msg[4])<<32 | uint64(msg[5])<<40 | uint64(msg[6])<<48 | uint64(msg[7])<<56
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
	}
	// The last word: the remaining bytes, with the length's low byte on top.
	m := uint64(n) << 56
	for i := len(msg) - 1; i >= 0; i-- {
		m |= uint64(msg[i]) << (8 * i)
	}
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m

	var out [16]byte
	v2 ^= 0xee
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	binary.LittleEndian.PutUint64(out[:8], v0^v1^v2^v3)
	v1 ^= 0xdd
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	binary.LittleEndian.PutUint64(out[8:], v0^v1^v2^v3)
	return out
}
