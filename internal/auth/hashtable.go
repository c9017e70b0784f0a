package auth

import "encoding/binary"

// principalTable finds a principal by its key's Hash, keyed by the hash's
// first eight bytes. A SHA-256 is uniform, so those bytes tell keys apart
// as well as the whole hash does, and a map of uint64 keys is found with
// one word's hash and compare: a map of 32-byte arrays hashes and
// compares all 32 bytes through the runtime's generic path (about 100
// instructions a request more; BENCHMARKS.md, "The feature tax with a
// margin, and every goal counted again"). Two hashes that share their
// first eight bytes are chained, so the table is exact for any set of
// keys.
type principalTable map[uint64]*principalSlot

type principalSlot struct {
	hash Hash
	p    *Principal
	next *principalSlot // another hash with the same first eight bytes
}

func hashWord(h *Hash) uint64 { return binary.LittleEndian.Uint64(h[:8]) }

// put maps h to p; a hash put again is mapped to the later principal, as
// a map's assignment would.
func (t principalTable) put(h Hash, p *Principal) {
	w := hashWord(&h)
	for s := t[w]; s != nil; s = s.next {
		if s.hash == h {
			s.p = p
			return
		}
	}
	t[w] = &principalSlot{hash: h, p: p, next: t[w]}
}

// get returns h's principal, or nil.
func (t principalTable) get(h *Hash) *Principal {
	for s := t[hashWord(h)]; s != nil; s = s.next {
		if s.hash == *h {
			return s.p
		}
	}
	return nil
}
