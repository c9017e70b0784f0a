package auth

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
)

// HashResolver resolves a key by its hash (HashKey): *Keys does, and so
// does a caller that looks in a static table first.
type HashResolver interface {
	ResolveHash(ctx context.Context, h Hash) (*Principal, error)
}

// memoTag is a secret's SipHash-2-4-128 under the memo's key: what the
// memo is indexed by instead of the secret.
type memoTag [16]byte

// The memo's bounds: 64 shards (as the key cache has, for the same
// reason: requests on many cores rarely meet on one lock) of at most
// 1,024 keys each, 65,536 in all. A full memo measured 7.3 MB of heap
// (112 bytes an entry with the maps' overhead; Go 1.26, amd64); a
// deployment with more keys in use than that loses only speed (an
// evicted key's next request pays its SHA-256 again), never an answer.
const (
	memoShards   = 64
	memoPerShard = 1024
)

// HashMemo remembers the SHA-256 (HashKey) of the secrets that resolved
// to an active key, so that a key's later requests skip it. Under
// callgrind, which hides the CPU's SHA extensions (as many cloud CPUs
// lack them), a key's SHA-256 cost about 2,600 instructions a request
// and the memo's SipHash and read about 530 (BENCHMARKS.md, "The key's
// hash, memoized").
//
// It keeps no secret in plaintext, only the SHA-256 that the key cache
// and the stores hold already, indexed by SipHash-2-4-128 of the secret
// under a 128-bit key drawn from crypto/rand when the memo is made,
// which never leaves the process. Without that key nobody can compute an index, so nobody can
// choose a secret whose index meets a memoized key's; by chance two
// secrets meet with probability 2^-128 a pair (an unkeyed or
// non-cryptographic hash would allow collisions found offline, and so
// a forged key that authenticates as another). Only secrets that
// resolved are put in, so unknown keys cannot fill the memo or push
// known ones out.
//
// The memo changes nothing about which keys are accepted: a secret's
// SHA-256 never changes, and every request still resolves the hash
// through the resolver, where revocation, expiry and rotation take
// effect as before. A memoized secret that no longer resolves is
// forgotten. Safe for concurrent use; the zero value is not usable (use
// NewHashMemo).
type HashMemo struct {
	key    sipKey
	shards [memoShards]memoShard
}

type memoShard struct {
	mu     sync.RWMutex
	hashes map[memoTag]Hash
	_      [64]byte // keep neighbouring shards' locks off one cache line
}

// NewHashMemo makes an empty memo with a fresh random key.
func NewHashMemo() *HashMemo {
	var raw [16]byte
	rand.Read(raw[:]) // never fails (crypto/rand's contract since Go 1.24)
	m := &HashMemo{key: sipKeyOf(raw)}
	for i := range m.shards {
		m.shards[i].hashes = make(map[memoTag]Hash)
	}
	return m
}

// Resolve resolves secret through r by its SHA-256, taken from the memo
// when the secret resolved before. A secret that resolves is memoized; a
// memoized one that r now refuses (revoked, expired, rotated) is
// forgotten. "" is ErrMissingKey, as Keys.Resolve answers.
func (m *HashMemo) Resolve(ctx context.Context, secret string, r HashResolver) (*Principal, error) {
	return m.ResolveOn(ctx, nil, secret, r)
}

// ResolveOn is Resolve for a request that came on the connection whose
// ConnMemo is conn (nil: none): the secret the connection presented
// last is taken from there without the memo's SipHash and map read, and
// a secret that resolves becomes the connection's entry.
func (m *HashMemo) ResolveOn(ctx context.Context, conn *ConnMemo, secret string, r HashResolver) (*Principal, error) {
	if secret == "" {
		return nil, ErrMissingKey
	}
	if e := conn.lookup(secret); e != nil {
		p, err := r.ResolveHash(ctx, e.hash)
		if err != nil && errors.Is(err, ErrBadKey) {
			conn.forget(e)
			m.forget(secret)
		}
		return p, err
	}
	p, h, err := m.resolve(ctx, secret, r)
	if err == nil {
		conn.remember(secret, h)
	}
	return p, err
}

// resolve is Resolve through the memo alone; it returns the hash it
// resolved by.
func (m *HashMemo) resolve(ctx context.Context, secret string, r HashResolver) (*Principal, Hash, error) {
	tag, h, known := m.lookup(secret)
	if !known {
		h = HashKey(secret)
	}
	p, err := r.ResolveHash(ctx, h)
	switch {
	case err == nil && !known:
		m.shard(tag).put(tag, h)
	case known && errors.Is(err, ErrBadKey):
		m.shard(tag).forget(tag)
	}
	return p, h, err
}

// forget drops secret from the memo (for a secret refused after a
// connection's entry spared the memo's look-up).
func (m *HashMemo) forget(secret string) {
	tag := memoTag(sipHash128(m.key, secret))
	m.shard(tag).forget(tag)
}

// lookup returns secret's tag and, when the secret is memoized, its hash:
// what a memoized key's request pays in place of HashKey.
func (m *HashMemo) lookup(secret string) (tag memoTag, h Hash, known bool) {
	tag = memoTag(sipHash128(m.key, secret))
	s := m.shard(tag)
	s.mu.RLock()
	h, known = s.hashes[tag]
	s.mu.RUnlock()
	return tag, h, known
}

// shard picks a tag's shard from its first bytes, which are uniformly
// random under a key nobody outside the process knows.
func (m *HashMemo) shard(t memoTag) *memoShard {
	return &m.shards[binary.LittleEndian.Uint64(t[:8])%memoShards]
}

// put memoizes a resolved secret's hash, evicting another when the shard
// is full: whichever the map's randomised iteration yields first, close
// to random replacement with no bookkeeping on reads.
func (s *memoShard) put(t memoTag, h Hash) {
	s.mu.Lock()
	if _, ok := s.hashes[t]; !ok && len(s.hashes) >= memoPerShard {
		for victim := range s.hashes {
			delete(s.hashes, victim)
			break
		}
	}
	s.hashes[t] = h
	s.mu.Unlock()
}

func (s *memoShard) forget(t memoTag) {
	s.mu.Lock()
	delete(s.hashes, t)
	s.mu.Unlock()
}

// len counts the memoized secrets (for tests).
func (m *HashMemo) len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		n += len(s.hashes)
		s.mu.RUnlock()
	}
	return n
}
