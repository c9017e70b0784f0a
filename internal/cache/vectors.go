package cache

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Vectors is the semantic cache's in-process index: the embedding of
// each stored answer's question, by scope, searched exactly (every
// vector of the scope, a dot product each: the vectors are unit length,
// so the dot product is the cosine). A scope's vectors lie in one flat
// slice, and the dot product is unrolled by four, which Go compiles to
// independent multiply-adds the CPU overlaps. It holds at most max
// vectors; beyond that the least recently used go, a hundredth of the
// bound at a time.
type Vectors struct {
	mu     sync.RWMutex // searches share it; Add and eviction take it alone
	dim    int
	max    int
	n      int
	scopes map[string]*vectorScope
	clock  atomic.Uint64 // stamps uses, for least-recently-used eviction
}

type vectorScope struct {
	vecs []float32 // len(keys)*dim
	keys []Key
	at   map[Key]int // position of each key
	used []uint64    // last use, by clock; atomic (searches stamp it under the read lock)
}

// NewVectors returns an empty index of dim-dimensional vectors holding
// at most max; with dim 0 the first vector added sets the dimension.
func NewVectors(dim, max int) *Vectors {
	return &Vectors{dim: dim, max: max, scopes: map[string]*vectorScope{}}
}

// Dim is the dimension of the index's vectors (0 before the first).
func (v *Vectors) Dim() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.dim
}

// Len is how many vectors the index holds.
func (v *Vectors) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.n
}

// Search returns the key whose vector is closest to q in scope, and the
// cosine; false when the scope is empty or q has the wrong dimension.
func (v *Vectors) Search(scope string, q []float32) (Key, float32, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if len(q) != v.dim {
		return "", 0, false
	}
	s := v.scopes[scope]
	if s == nil || len(s.keys) == 0 {
		return "", 0, false
	}
	best, bestAt := float32(-2), -1
	for i := range s.keys {
		if d := dot(q, s.vecs[i*v.dim:(i+1)*v.dim]); d > best {
			best, bestAt = d, i
		}
	}
	atomic.StoreUint64(&s.used[bestAt], v.clock.Add(1))
	return s.keys[bestAt], best, true
}

// dot is the dot product of two vectors of one length.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Add indexes vec (of the index's dimension, unit length) under key in
// scope, replacing key's earlier vector in that scope, and returns the
// keys evicted to stay within the bound.
func (v *Vectors) Add(scope string, key Key, vec []float32) []Key {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dim == 0 {
		v.dim = len(vec)
	}
	if len(vec) != v.dim || len(vec) == 0 {
		return nil // another embedder's vector: this index cannot compare it
	}
	s := v.scopes[scope]
	if s == nil {
		s = &vectorScope{at: map[Key]int{}}
		v.scopes[scope] = s
	}
	if i, ok := s.at[key]; ok {
		copy(s.vecs[i*v.dim:], vec)
		atomic.StoreUint64(&s.used[i], v.clock.Add(1))
		return nil
	}
	s.at[key] = len(s.keys)
	s.vecs = append(s.vecs, vec...)
	s.keys = append(s.keys, key)
	s.used = append(s.used, v.clock.Add(1))
	v.n++
	if v.n <= v.max {
		return nil
	}
	return v.evict(v.n - v.max + max(v.max/100, 1) - 1)
}

// Remove drops key from scope (its answer is gone from the exact cache).
func (v *Vectors) Remove(scope string, key Key) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.scopes[scope]; s != nil {
		if i, ok := s.at[key]; ok {
			v.removeAt(scope, s, i)
		}
	}
}

// evict removes the k least recently used vectors; v.mu is held.
func (v *Vectors) evict(k int) []Key {
	type ref struct {
		used  uint64
		scope string
		at    int
	}
	all := make([]ref, 0, v.n)
	for name, s := range v.scopes {
		for i := range s.keys {
			all = append(all, ref{atomic.LoadUint64(&s.used[i]), name, i})
		}
	}
	slices.SortFunc(all, func(a, b ref) int {
		switch {
		case a.used < b.used:
			return -1
		case a.used > b.used:
			return 1
		}
		return 0
	})
	gone := all[:min(k, len(all))]
	// Remove from the end of each scope first, so the positions of the
	// others stay valid.
	slices.SortFunc(gone, func(a, b ref) int { return b.at - a.at })
	keys := make([]Key, 0, len(gone))
	for _, r := range gone {
		s := v.scopes[r.scope]
		keys = append(keys, s.keys[r.at])
		v.removeAt(r.scope, s, r.at)
	}
	return keys
}

// removeAt deletes the i-th vector of s by moving the last one into its
// place; v.mu is held.
func (v *Vectors) removeAt(scope string, s *vectorScope, i int) {
	last := len(s.keys) - 1
	delete(s.at, s.keys[i])
	if i != last {
		copy(s.vecs[i*v.dim:(i+1)*v.dim], s.vecs[last*v.dim:])
		s.keys[i] = s.keys[last]
		s.used[i] = s.used[last]
		s.at[s.keys[i]] = i
	}
	s.vecs = s.vecs[:last*v.dim]
	s.keys = s.keys[:last]
	s.used = s.used[:last]
	v.n--
	if last == 0 {
		delete(v.scopes, scope)
	}
}
