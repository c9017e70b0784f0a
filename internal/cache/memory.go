package cache

import (
	"container/list"
	"sync"
	"time"
)

// Memory is the in-process tier: a least-recently-used map bounded in
// bytes (Entry.Size), whose entries also expire at their Expires time.
// One mutex guards it; a lookup holds it for a map read and a list move.
type Memory struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front: most recently used
	items map[Key]*list.Element
	now   func() time.Time
}

type memItem struct {
	key   Key
	entry *Entry
	size  int64
}

// NewMemory returns an empty tier holding at most maxBytes; now is the
// clock (nil: time.Now).
func NewMemory(maxBytes int64, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{max: maxBytes, order: list.New(), items: map[Key]*list.Element{}, now: now}
}

// Get returns the live entry under k, marking it recently used.
func (m *Memory) Get(k Key) (*Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[k]
	if !ok {
		return nil, false
	}
	it := el.Value.(*memItem)
	if !m.now().Before(it.entry.Expires) {
		m.remove(el)
		return nil, false
	}
	m.order.MoveToFront(el)
	return it.entry, true
}

// Put stores e under k, evicting the least recently used entries to stay
// within the bound. An entry larger than the whole bound is not kept.
func (m *Memory) Put(k Key, e *Entry) {
	size := e.Size()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[k]; ok {
		m.remove(el)
	}
	if size > m.max {
		return
	}
	for m.size+size > m.max {
		m.remove(m.order.Back())
	}
	m.items[k] = m.order.PushFront(&memItem{key: k, entry: e, size: size})
	m.size += size
}

// Purge removes every entry of project ("" removes all of them) and
// reports how many went.
func (m *Memory) Purge(project string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for el := m.order.Front(); el != nil; {
		next := el.Next()
		if project == "" || el.Value.(*memItem).entry.Project == project {
			m.remove(el)
			n++
		}
		el = next
	}
	return n
}

// Len and Bytes report the tier's contents, for metrics and tests.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.size
}

func (m *Memory) remove(el *list.Element) {
	it := el.Value.(*memItem)
	m.order.Remove(el)
	delete(m.items, it.key)
	m.size -= it.size
}
