package cache

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// Vectors is the semantic cache's in-process index: the embedding of
// each stored answer's question, by scope. The vectors are unit length,
// so a dot product is their cosine; the dot product is unrolled by four,
// which Go compiles to independent multiply-adds the CPU overlaps.
//
// A small scope is searched exactly, every vector. A scope that grows
// past ivfMin vectors gets an inverted file, built in the background: a
// few hundred centroids (sampled vectors, moved once to the mean of what
// they attract), each vector filed under its nearest (as an int8 code,
// in its list's order), and a search scans only the lists of the query's
// nearest centroids — a few percent of the scope — re-scoring its best
// few candidates in float32. The file is rebuilt when the scope has doubled; new
// vectors in between are filed as they come.
//
// It holds at most max vectors; beyond that the least recently used go,
// a hundredth of the bound at a time. A removed vector leaves a hole
// until a quarter of the scope is holes; then the scope is compacted.
type Vectors struct {
	mu     sync.RWMutex // searches share it; Add, removal and eviction take it alone
	dim    int
	max    int
	n      int
	scopes map[string]*vectorScope
	clock  atomic.Uint64  // stamps uses, for least-recently-used eviction
	builds sync.WaitGroup // inverted files being built
}

type vectorScope struct {
	vecs  []float32 // len(keys)*dim; never rewritten in place (builds read old snapshots)
	keys  []Key
	used  []uint64 // last use, by clock; atomic (searches stamp it under the read lock)
	dead  []bool   // a hole left by a removal
	at    map[Key]int
	live  int
	holes int
	epoch int // counts compactions: a build of an older epoch is discarded
	ivf   *invertedFile
	// building is set while an inverted file is built for this scope.
	building bool
}

// invertedFile files a scope's positions under their nearest centroid.
type invertedFile struct {
	centroids []float32 // k*dim
	lists     [][]int32 // positions by centroid
	// codes are each list's vectors quantised to int8 (×127), in list
	// order: a search streams through them rather than jumping about the
	// scope's float32 vectors, a quarter of the bytes and no cache miss
	// per vector, and re-scores its best few candidates exactly.
	codes   [][]int8
	listOf  []int32 // position → its list (-1: none, a hole)
	slot    []int32 // position → its index in that list
	builtAt int     // live vectors when it was built
	probe   int     // lists a search scans
}

const (
	ivfMin     = 4096 // a scope this large gets an inverted file
	ivfRebuild = 2    // rebuilt when the scope has doubled
)

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

// Wait waits for the inverted files being built (tests, benchmarks).
func (v *Vectors) Wait() { v.builds.Wait() }

// Search returns the key whose vector is closest to q in scope, and the
// cosine; false when the scope is empty or q has the wrong dimension.
func (v *Vectors) Search(scope string, q []float32) (Key, float32, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if len(q) != v.dim {
		return "", 0, false
	}
	s := v.scopes[scope]
	if s == nil || s.live == 0 {
		return "", 0, false
	}
	best, bestAt := float32(-2), -1
	if f := s.ivf; f != nil {
		// The int8 scores pick a few candidates; their float32 dot
		// products decide.
		var qc [maxQuantDim]int8
		code := quantise(qc[:0], q)
		var cand [rescore]int32
		var candScore [rescore]int32
		nc := 0
		for _, l := range f.nearest(q, v.dim) {
			codes := f.codes[l]
			for j, p := range f.lists[l] {
				d := dot8(code, codes[j*v.dim:(j+1)*v.dim])
				if nc < rescore {
					cand[nc], candScore[nc] = p, d
					nc++
					continue
				}
				worst := 0
				for c := 1; c < rescore; c++ {
					if candScore[c] < candScore[worst] {
						worst = c
					}
				}
				if d > candScore[worst] {
					cand[worst], candScore[worst] = p, d
				}
			}
		}
		for _, p := range cand[:nc] {
			if d := dot(q, s.vecs[int(p)*v.dim:(int(p)+1)*v.dim]); d > best {
				best, bestAt = d, int(p)
			}
		}
	} else {
		for i := range s.keys {
			if s.dead[i] {
				continue
			}
			if d := dot(q, s.vecs[i*v.dim:(i+1)*v.dim]); d > best {
				best, bestAt = d, i
			}
		}
	}
	if bestAt < 0 {
		return "", 0, false
	}
	atomic.StoreUint64(&s.used[bestAt], v.clock.Add(1))
	return s.keys[bestAt], best, true
}

// nearest returns the probe lists whose centroids are closest to q.
func (f *invertedFile) nearest(q []float32, dim int) []int {
	k := len(f.lists)
	type scored struct {
		d float32
		l int
	}
	top := make([]scored, 0, f.probe+1)
	for l := range k {
		d := dot(q, f.centroids[l*dim:(l+1)*dim])
		if len(top) == f.probe && d <= top[len(top)-1].d {
			continue
		}
		i := len(top)
		for i > 0 && top[i-1].d < d {
			i--
		}
		top = slices.Insert(top, i, scored{d, l})
		if len(top) > f.probe {
			top = top[:f.probe]
		}
	}
	out := make([]int, len(top))
	for i, t := range top {
		out[i] = t.l
	}
	return out
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
		v.removeAt(scope, s, i) // replaced: the new vector is filed afresh
		if v.scopes[scope] == nil {
			s = &vectorScope{at: map[Key]int{}}
			v.scopes[scope] = s
		}
	}
	p := len(s.keys)
	s.at[key] = p
	s.vecs = append(s.vecs, vec...)
	s.keys = append(s.keys, key)
	s.used = append(s.used, v.clock.Add(1))
	s.dead = append(s.dead, false)
	s.live++
	v.n++
	if f := s.ivf; f != nil {
		f.file(p, vec, v.dim)
	}
	if !s.building && s.live >= ivfMin && (s.ivf == nil || s.live >= ivfRebuild*s.ivf.builtAt) {
		v.startBuild(scope, s)
	}
	if v.n <= v.max {
		return nil
	}
	return v.evict(v.n - v.max + max(v.max/100, 1) - 1)
}

// file adds position p (vector vec) to its nearest centroid's list.
func (f *invertedFile) file(p int, vec []float32, dim int) {
	bestL := nearestCentroid(vec, f.centroids, dim)
	for len(f.listOf) <= p {
		f.listOf = append(f.listOf, -1)
		f.slot = append(f.slot, -1)
	}
	f.listOf[p], f.slot[p] = int32(bestL), int32(len(f.lists[bestL]))
	f.lists[bestL] = append(f.lists[bestL], int32(p))
	f.codes[bestL] = quantise(f.codes[bestL], vec)
}

// unfile removes position p from its list.
func (f *invertedFile) unfile(p int) {
	if p >= len(f.listOf) || f.listOf[p] < 0 {
		return
	}
	l, i := f.listOf[p], f.slot[p]
	list := f.lists[l]
	n := len(list) - 1
	last := list[n]
	list[i] = last
	f.slot[last] = i
	f.lists[l] = list[:n]
	codes := f.codes[l]
	dim := len(codes) / (n + 1)
	copy(codes[int(i)*dim:(int(i)+1)*dim], codes[n*dim:])
	f.codes[l] = codes[:n*dim]
	f.listOf[p], f.slot[p] = -1, -1
}

// rescore is how many int8 candidates a search re-scores in float32;
// maxQuantDim bounds the query's code on the stack (larger vectors spill
// to the heap).
const (
	rescore     = 8
	maxQuantDim = 1024
)

// quantise appends v (unit length: components within ±1) as int8 ×127.
func quantise(dst []int8, v []float32) []int8 {
	for _, x := range v {
		dst = append(dst, int8(max(-127, min(127, x*127+copysign(0.5, x)))))
	}
	return dst
}

func copysign(h, x float32) float32 {
	if x < 0 {
		return -h
	}
	return h
}

// dot8 is the dot product of two int8 codes of one length, in int32,
// unrolled by four like dot.
func dot8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// startBuild builds an inverted file for s in the background from a
// snapshot of its vectors (which are never rewritten in place), and
// installs it unless the scope was compacted meanwhile; v.mu is held.
func (v *Vectors) startBuild(scope string, s *vectorScope) {
	s.building = true
	n0, epoch, dim := len(s.keys), s.epoch, v.dim
	vecs := s.vecs[: n0*dim : n0*dim]
	dead := slices.Clone(s.dead)
	live := s.live
	v.builds.Add(1)
	go func() {
		defer v.builds.Done()
		f := buildInvertedFile(vecs, dead, dim, live)
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.scopes[scope] != s || s.epoch != epoch {
			s.building = false
			return // compacted or emptied meanwhile: the next Add tries again
		}
		// Vectors removed since the snapshot are holes now; those added
		// since are filed here.
		for p := range n0 {
			if s.dead[p] && f.listOf[p] >= 0 {
				f.unfile(p)
			}
		}
		for p := n0; p < len(s.keys); p++ {
			if !s.dead[p] {
				f.file(p, s.vecs[p*dim:(p+1)*dim], dim)
			}
		}
		f.builtAt = s.live
		s.ivf, s.building = f, false
	}()
}

// buildInvertedFile picks centroids among the live vectors, moves each
// once to the mean of a sample's vectors it attracts, and files every
// live vector under its nearest.
func buildInvertedFile(vecs []float32, dead []bool, dim, live int) *invertedFile {
	n := len(dead)
	k := min(max(live/128, 16), 1024)
	r := rand.New(rand.NewPCG(uint64(n), uint64(live)))
	alive := make([]int, 0, live)
	for p := range n {
		if !dead[p] {
			alive = append(alive, p)
		}
	}
	r.Shuffle(len(alive), func(i, j int) { alive[i], alive[j] = alive[j], alive[i] })
	centroids := make([]float32, 0, k*dim)
	for _, p := range alive[:k] {
		centroids = append(centroids, vecs[p*dim:(p+1)*dim]...)
	}
	// One step of k-means over a sample: each centroid to the (unit)
	// mean of the sample vectors nearest to it.
	sums := make([]float32, k*dim)
	counts := make([]int, k)
	for _, p := range alive[:min(len(alive), 16*k)] {
		x := vecs[p*dim : (p+1)*dim]
		l := nearestCentroid(x, centroids, dim)
		counts[l]++
		for i, xi := range x {
			sums[l*dim+i] += xi
		}
	}
	for l := range k {
		if counts[l] == 0 {
			continue
		}
		c := sums[l*dim : (l+1)*dim]
		if norm := dot(c, c); norm > 0 {
			scale := 1 / float32(math.Sqrt(float64(norm)))
			for i := range c {
				centroids[l*dim+i] = c[i] * scale
			}
		}
	}
	f := &invertedFile{centroids: centroids, lists: make([][]int32, k), codes: make([][]int8, k), listOf: make([]int32, n),
		slot:  make([]int32, n),
		probe: max(8, k/64)}
	for p := range n {
		f.listOf[p], f.slot[p] = -1, -1
		if !dead[p] {
			f.file(p, vecs[p*dim:(p+1)*dim], dim)
		}
	}
	return f
}

func nearestCentroid(x, centroids []float32, dim int) int {
	best, bestL := float32(-2), 0
	for l := range len(centroids) / dim {
		if d := dot(x, centroids[l*dim:(l+1)*dim]); d > best {
			best, bestL = d, l
		}
	}
	return bestL
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
		key   Key
	}
	all := make([]ref, 0, v.n)
	for name, s := range v.scopes {
		for i, key := range s.keys {
			if !s.dead[i] {
				all = append(all, ref{atomic.LoadUint64(&s.used[i]), name, key})
			}
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
	keys := make([]Key, 0, len(gone))
	for _, r := range gone {
		if s := v.scopes[r.scope]; s != nil {
			if i, ok := s.at[r.key]; ok {
				keys = append(keys, r.key)
				v.removeAt(r.scope, s, i)
			}
		}
	}
	return keys
}

// removeAt makes position i of s a hole, compacting the scope when a
// quarter of it is holes; v.mu is held.
func (v *Vectors) removeAt(scope string, s *vectorScope, i int) {
	s.dead[i] = true
	delete(s.at, s.keys[i])
	if s.ivf != nil {
		s.ivf.unfile(i)
	}
	s.live--
	s.holes++
	v.n--
	if s.live == 0 {
		delete(v.scopes, scope)
		return
	}
	if s.holes > 64 && s.holes*4 > len(s.keys) {
		v.compact(s)
	}
}

// compact rewrites s without its holes, into new slices (a build may
// still be reading the old ones), renumbering its inverted file; v.mu is
// held.
func (v *Vectors) compact(s *vectorScope) {
	n := s.live
	vecs := make([]float32, 0, n*v.dim)
	keys := make([]Key, 0, n)
	used := make([]uint64, 0, n)
	var lists [][]int32
	var listOf []int32
	if s.ivf != nil {
		lists = make([][]int32, len(s.ivf.lists))
		listOf = make([]int32, 0, n)
	}
	for p, key := range s.keys {
		if s.dead[p] {
			continue
		}
		s.at[key] = len(keys)
		if s.ivf != nil {
			listOf = append(listOf, s.ivf.listOf[p])
		}
		vecs = append(vecs, s.vecs[p*v.dim:(p+1)*v.dim]...)
		keys = append(keys, key)
		used = append(used, atomic.LoadUint64(&s.used[p]))
	}
	s.vecs, s.keys, s.used, s.dead = vecs, keys, used, make([]bool, n)
	s.holes = 0
	s.epoch++
	if f := s.ivf; f != nil {
		slot := make([]int32, n)
		codes := make([][]int8, len(lists))
		for p, l := range listOf {
			slot[p] = int32(len(lists[l]))
			lists[l] = append(lists[l], int32(p))
			codes[l] = quantise(codes[l], vecs[p*v.dim:(p+1)*v.dim])
		}
		f.lists, f.codes, f.listOf, f.slot = lists, codes, listOf, slot
	}
}
