package cache

import (
	"context"
	"encoding/hex"
	"sync"
	"time"
)

// Cache is the process's exact cache, shared by every config
// generation: the in-process tier, in front of an optional lower tier
// (Store). A lookup reads the in-process tier, then the lower one, and
// promotes what the lower one had; a write goes to the in-process tier at
// once and to the lower one in the background, so neither ever delays
// a response.
type Cache struct {
	mem   *Memory
	lower Store
	now   func() time.Time
	stop  context.CancelFunc // ends the Invalidator subscription; nil without one
	// held is the set of keys the lower tier holds, when it is a
	// KeyLister: a key not in it is a miss without a read. Binary
	// SHA-256s, half the size of the hex keys.
	heldMu sync.RWMutex
	held   map[[32]byte]struct{}

	mu     sync.RWMutex // guards closing writes against Puts
	closed bool
	writes chan pendingWrite
	done   chan struct{}
}

// Store is a lower tier (SQLite in embedded mode, Redis in cluster mode).
// GetEntry returns nil and no error on a miss or an expired entry; it is
// given the project (the name Entry.Project holds) because a tier may
// keep each project's entries together (Redis hash tags).
type Store interface {
	GetEntry(ctx context.Context, project string, k Key) (*Entry, error)
	PutEntry(ctx context.Context, k Key, e *Entry) error
	PurgeEntries(ctx context.Context, project string) (int, error)
}

// Pruner is a lower tier that deletes its expired entries when asked
// (SQLite); one whose entries expire by themselves (Redis TTLs) is not.
type Pruner interface {
	PruneEntries(ctx context.Context, now time.Time, limit int) (int, error)
}

// pruneEvery is how often the expired entries of a Pruner tier go, a
// pruneBatch at a time.
const (
	pruneEvery = time.Minute
	pruneBatch = 1000
)

// KeyLister is a lower tier this process alone writes (SQLite), which can
// list the keys it holds: the Cache then keeps the set of them in memory
// and never reads the tier for a key it does not hold, so a miss costs
// no database read.
type KeyLister interface {
	EntryKeys(ctx context.Context, fn func(Key)) error
}

// Invalidator is a lower tier shared by several processes (Redis), which
// hears of purges made through any of them: each process then empties
// its own in-process tier of the project too.
type Invalidator interface {
	Purges(ctx context.Context, purged func(project string))
}

// pendingWrite is a write for the lower tier, or, with purged set, a
// purge, queued behind the writes before it so none of them lands after
// it and brings a purged entry back.
type pendingWrite struct {
	key    Key
	entry  *Entry
	purged chan<- purgeResult
	ctx    context.Context
	proj   string
}

type purgeResult struct {
	n   int
	err error
}

// Options configure a Cache.
type Options struct {
	MaxBytes int64            // bound of the in-process tier
	Lower    Store            // nil: in-process only
	Now      func() time.Time // nil: time.Now
	// OnLowerError hears of lower-tier failures, which never fail a
	// request (a failed read is a miss, a failed write is skipped).
	OnLowerError func(op string, err error)
}

// New starts a Cache; Close stops its background writer.
func New(o Options) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Cache{mem: NewMemory(o.MaxBytes, o.Now), lower: o.Lower, now: o.Now, done: make(chan struct{})}
	if c.lower == nil {
		close(c.done)
		return c
	}
	c.writes = make(chan pendingWrite, 1024)
	onErr := o.OnLowerError
	if onErr == nil {
		onErr = func(string, error) {}
	}
	if kl, ok := c.lower.(KeyLister); ok {
		c.held = map[[32]byte]struct{}{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := kl.EntryKeys(ctx, func(k Key) { c.hold(k) })
		cancel()
		if err != nil {
			c.held = nil // unknown: read the tier on every miss
			if o.OnLowerError != nil {
				o.OnLowerError("list", err)
			}
		}
	}
	if inv, ok := c.lower.(Invalidator); ok {
		ctx, cancel := context.WithCancel(context.Background())
		c.stop = cancel
		go inv.Purges(ctx, func(project string) { c.mem.Purge(project) })
	}
	pruner, _ := c.lower.(Pruner)
	go func() {
		defer close(c.done)
		tick := time.NewTicker(pruneEvery)
		defer tick.Stop()
		for {
			select {
			case w, ok := <-c.writes:
				if !ok {
					return
				}
				if w.purged != nil {
					n, err := c.lower.PurgeEntries(w.ctx, w.proj)
					w.purged <- purgeResult{n, err}
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := c.lower.PutEntry(ctx, w.key, w.entry); err != nil {
					onErr("put", err)
				}
				cancel()
			case <-tick.C:
				if pruner != nil {
					c.prune(pruner, onErr)
				}
			}
		}
	}()
	return c
}

// prune deletes the lower tier's expired entries, a batch at a time.
func (c *Cache) prune(p Pruner, onErr func(string, error)) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := p.PruneEntries(ctx, c.now(), pruneBatch)
		cancel()
		if err != nil {
			onErr("prune", err)
			return
		}
		if n < pruneBatch {
			return
		}
	}
}

// Get returns the live entry under k, which belongs to project.
func (c *Cache) Get(ctx context.Context, project string, k Key) (*Entry, bool) {
	if e, ok := c.mem.Get(k); ok {
		return e, true
	}
	if c.lower == nil || !c.holds(k) {
		return nil, false
	}
	e, err := c.lower.GetEntry(ctx, project, k)
	if err != nil || e == nil || !c.now().Before(e.Expires) {
		return nil, false
	}
	c.mem.Put(k, e) // promoted: the next hit is in-process
	return e, true
}

// Put stores e under k: in-process now, in the lower tier in the
// background. A write that finds the background queue full is dropped
// from the lower tier (the in-process copy still serves).
func (c *Cache) Put(k Key, e *Entry) {
	c.mem.Put(k, e)
	c.hold(k)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.writes == nil || c.closed {
		return
	}
	select {
	case c.writes <- pendingWrite{key: k, entry: e}:
	default:
	}
}

// holdKey is k as the held set keeps it; false for a key that is not a
// SHA-256 in hex (then the tier is always read).
func holdKey(k Key) ([32]byte, bool) {
	var b [32]byte
	_, err := hex.Decode(b[:], []byte(k))
	return b, err == nil && len(k) == 64
}

// hold notes that the lower tier holds (or is about to hold) k.
func (c *Cache) hold(k Key) {
	if c.held == nil {
		return
	}
	if b, ok := holdKey(k); ok {
		c.heldMu.Lock()
		c.held[b] = struct{}{}
		c.heldMu.Unlock()
	}
}

// holds reports whether the lower tier may hold k: always, without a
// held set. An entry purged or pruned stays in the set, and costs one
// read that misses.
func (c *Cache) holds(k Key) bool {
	if c.held == nil {
		return true
	}
	b, ok := holdKey(k)
	if !ok {
		return true
	}
	c.heldMu.RLock()
	_, in := c.held[b]
	c.heldMu.RUnlock()
	return in
}

// Purge removes project's entries ("" every entry) from every tier and
// reports how many the in-process tier and the lower one held.
func (c *Cache) Purge(ctx context.Context, project string) (int, error) {
	n := c.mem.Purge(project)
	if c.lower == nil {
		return n, nil
	}
	// Behind the queued writes, so none lands after the purge.
	done := make(chan purgeResult, 1)
	c.mu.RLock()
	queued := c.writes != nil && !c.closed
	if queued {
		select {
		case c.writes <- pendingWrite{purged: done, ctx: ctx, proj: project}:
		case <-ctx.Done():
			c.mu.RUnlock()
			return n, ctx.Err()
		}
	}
	c.mu.RUnlock()
	if !queued {
		m, err := c.lower.PurgeEntries(ctx, project)
		return n + m, err
	}
	select {
	case r := <-done:
		return n + r.n, r.err
	case <-ctx.Done():
		return n, ctx.Err()
	}
}

// Memory is the in-process tier, for metrics and tests.
func (c *Cache) Memory() *Memory { return c.mem }

// Close stops the background writer after the queued writes.
func (c *Cache) Close() {
	if c.stop != nil {
		c.stop()
	}
	c.mu.Lock()
	if c.writes != nil && !c.closed {
		close(c.writes)
	}
	c.closed = true
	c.mu.Unlock()
	<-c.done
}
