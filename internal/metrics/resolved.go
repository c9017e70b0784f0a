package metrics

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// resolvedSet keeps the instruments resolved for each label tuple (a
// bundle, an attempt pair), so a request looks its tuple up once rather
// than asking each vector (which locks and hashes the labels).
//
// The tuples are structs of strings: sync.Map hashes such a key through
// the runtime's generic type hash, field by field, and compares it
// through an interface — about a thousand instructions a lookup, paid by
// every request twice. In front of the map sits a direct-mapped table of
// recent tuples indexed by a cheap hash of the tuple (slot: its strings'
// addresses, the status), checked by comparing the key itself: the few
// tuples a gateway sees most hit it; a tuple that collides with another
// takes the map, as before, and takes over the slot.
type resolvedSet[K slotted, V any] struct {
	m      sync.Map // K → *resolved[K, V]
	n      atomic.Int64
	recent [recentSlots]atomic.Pointer[resolved[K, V]]
	// keepAll keeps every tuple, past maxBundles too: set where the
	// values hold the counts themselves (a request's bundle), which a
	// tuple resolved afresh on each call would lose. Their labels are
	// bounded by the configuration (see RequestObs).
	keepAll bool
}

// recentSlots is the size of the direct-mapped table: a power of two,
// the number of mix's values.
const recentSlots = 64

// slotted is a label tuple with a cheap hash for the recent table; any
// value will do, so long as a key always gets the same one: a slot only
// ever serves the key it holds. Keys equal by content but held in other
// memory may get other slots (the hashes use the strings' addresses).
type slotted interface {
	comparable
	slot() uint
}

// resolved is a tuple's instruments, as the map and the table hold them.
type resolved[K slotted, V any] struct {
	key K
	val V
	// gone is set once the map forgets the tuple (its series were
	// deleted), so that a slot still holding it is not trusted.
	gone atomic.Bool
}

// get returns k's instruments, resolving them with resolve the first time;
// beyond maxBundles tuples they are resolved on every call (but with
// keepAll).
func (s *resolvedSet[K, V]) get(k K, resolve func(K) V) V {
	slot := &s.recent[k.slot()%recentSlots]
	if r := slot.Load(); r != nil && r.key == k && !r.gone.Load() {
		return r.val
	}
	if v, ok := s.m.Load(k); ok {
		r := v.(*resolved[K, V])
		slot.Store(r)
		return r.val
	}
	r := &resolved[K, V]{key: k, val: resolve(k)}
	if s.keepAll || s.n.Load() < maxBundles {
		if v, loaded := s.m.LoadOrStore(k, r); !loaded {
			s.n.Add(1)
			slot.Store(r)
		} else {
			r = v.(*resolved[K, V])
		}
	}
	return r.val
}

// recentFor is the tuple slot holds (slot is a key's slot()), or nil.
// It lets a caller of a concrete key type compare the key itself, in
// code the compiler inlines: get's comparison is the runtime's generic
// equality, a call per string of the key, and its slot() a call through
// the instantiation's dictionary. A tuple the caller does not find here
// it asks get for.
func (s *resolvedSet[K, V]) recentFor(slot uint) *resolved[K, V] {
	if r := s.recent[slot%recentSlots].Load(); r != nil && !r.gone.Load() {
		return r
	}
	return nil
}

// drop forgets the tuples drop matches.
func (s *resolvedSet[K, V]) drop(drop func(K) bool) {
	s.m.Range(func(k, v any) bool {
		if drop(k.(K)) {
			if _, ok := s.m.LoadAndDelete(k); ok {
				v.(*resolved[K, V]).gone.Store(true)
				s.n.Add(-1)
			}
		}
		return true
	})
}

// addr is the address of s's bytes, as a number to hash.
func addr(s string) uint { return uint(uintptr(unsafe.Pointer(unsafe.StringData(s)))) }

// differ is 0 exactly when a and b are the same bytes in the same memory
// (address and length; two strings so are equal), and nonzero otherwise:
// equal strings held in other memory differ too.
func differ(a, b string) uint { return addr(a) ^ addr(b) | uint(len(a)^len(b)) }

// mix is h's top bits after a multiplication by the golden ratio's 64-bit
// fraction (Fibonacci hashing): every bit of h reaches them, so strings'
// addresses, which differ in their middle bits, spread over the slots.
func mix(h uint) uint { return uint(uint64(h) * 0x9E3779B97F4A7C15 >> 58) }
