package auth

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// numShards spreads the key cache over independent locks, so requests on
// many cores rarely meet on one mutex. A power of two: the shard is picked
// from the hash's first bytes, which are uniformly random.
const numShards = 64

// cache maps key hashes to what a lookup found: positive entries (an
// active key and its Principal) and negative ones (no such key, or one
// that is revoked or expired), each bounded on its own so a flood of
// unknown keys can never push out the known ones. It also tracks the
// lookups in flight, one per hash.
type cache struct {
	shards [numShards]shard
}

type shard struct {
	mu     sync.RWMutex
	pos    map[Hash]*entry
	neg    map[Hash]int64 // unix ns until which the hash is known to be bad
	calls  map[Hash]*call
	maxPos int
	maxNeg int
	_      [64]byte // keep neighbouring shards' locks off one cache line
}

// entry is a cached active key. Its fields are fixed at creation except
// the atomics, which record use and a refresh in progress.
type entry struct {
	p       *Principal
	loaded  int64 // unix ns of the store read
	expires int64 // unix ns of Principal.ExpiresAt; 0 = never

	refreshing atomic.Bool  // a background refresh is under way
	used       atomic.Int64 // unix ns of the last use recorded for last-used
	queued     atomic.Bool  // in the toucher's batch
}

// call is one store lookup that concurrent requests for the same hash
// share. Its results are written before done is closed.
type call struct {
	done  chan struct{}
	stale bool // the hash changed while the lookup ran: answer, but do not cache

	entry *entry // an active key
	err   error  // ErrBadKey, or an unavailable error when the store failed
}

func (c *cache) init(maxPos, maxNeg int) {
	perPos := max(1, (maxPos+numShards-1)/numShards)
	perNeg := max(1, (maxNeg+numShards-1)/numShards)
	for i := range c.shards {
		s := &c.shards[i]
		s.pos = make(map[Hash]*entry)
		s.neg = make(map[Hash]int64)
		s.calls = make(map[Hash]*call)
		s.maxPos, s.maxNeg = perPos, perNeg
	}
}

func (c *cache) shard(h Hash) *shard {
	return &c.shards[binary.LittleEndian.Uint64(h[:8])%numShards]
}

// drop forgets h and marks a lookup of it in flight as stale, since it
// may have read the record before the change.
func (c *cache) drop(h Hash) {
	s := c.shard(h)
	s.mu.Lock()
	delete(s.pos, h)
	delete(s.neg, h)
	if cl := s.calls[h]; cl != nil {
		cl.stale = true
	}
	s.mu.Unlock()
}

// clear forgets everything and marks every lookup in flight as stale.
func (c *cache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.pos)
		clear(s.neg)
		for _, cl := range s.calls {
			cl.stale = true
		}
		s.mu.Unlock()
	}
}

// len counts the positive and negative entries (for tests and metrics).
func (c *cache) len() (pos, neg int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		pos += len(s.pos)
		neg += len(s.neg)
		s.mu.RUnlock()
	}
	return pos, neg
}

// putPosLocked caches an active key, evicting another when the shard is
// full. Eviction takes whatever the map's randomised iteration yields
// first: close to random replacement, which needs no bookkeeping on the
// request path (an LRU would write on every hit).
func (s *shard) putPosLocked(h Hash, e *entry) {
	delete(s.neg, h)
	if _, ok := s.pos[h]; !ok && len(s.pos) >= s.maxPos {
		for victim := range s.pos {
			delete(s.pos, victim)
			break
		}
	}
	s.pos[h] = e
}

// putNegLocked caches a miss until the given time, evicting an expired
// miss, or else any, when the shard is full.
func (s *shard) putNegLocked(h Hash, until, now int64) {
	delete(s.pos, h)
	if _, ok := s.neg[h]; !ok && len(s.neg) >= s.maxNeg {
		// Prefer an expired miss, but look at a few only, not the whole map.
		var victim Hash
		n := 0
		for v, t := range s.neg {
			if n == 0 || t <= now {
				victim = v
			}
			if n++; t <= now || n == 8 {
				break
			}
		}
		delete(s.neg, victim)
	}
	s.neg[h] = until
}

// bucket is a token bucket: rate tokens a second, holding at most burst.
// The zero bucket allows nothing.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per nanosecond
	burst  float64
	tokens float64
	last   int64 // unix ns of the last refill
}

func newBucket(perSecond float64, burst int, now int64) *bucket {
	return &bucket{rate: perSecond / 1e9, burst: float64(burst), tokens: float64(burst), last: now}
}

// allow takes a token if there is one at now.
func (b *bucket) allow(now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now > b.last {
		b.tokens = min(b.burst, b.tokens+float64(now-b.last)*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
