package limit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// BudgetKey names one budget counter: a scope's spend in one period.
type BudgetKey struct {
	Tag    string // the Admission.Tag it was spent under (Redis needs it to rebuild the counter)
	Scope  Scope
	ID     string
	Period Period
	Start  string // the period's first day, "2006-01-02"; "" for Total
}

// SpendStore is the durable record of settled spend, in micro-dollars per
// BudgetKey: SQLite in embedded mode, PostgreSQL in cluster mode.
type SpendStore interface {
	// LoadSpend returns the spend of every counter whose Start is "" or
	// not before since (a "2006-01-02" date).
	LoadSpend(ctx context.Context, since string) (map[BudgetKey]int64, error)
	// AddSpend adds each delta to its counter, creating missing ones, in
	// one transaction.
	AddSpend(ctx context.Context, deltas map[BudgetKey]int64) error
}

// DefaultFlushEvery is how often a SpendLog writes: the bulk of the
// crash-loss window.
const DefaultFlushEvery = 250 * time.Millisecond

// SpendLog batches settled spend in memory and writes it to a SpendStore
// from one background goroutine, every FlushEvery. Add takes a short
// mutex; it never waits for the store.
type SpendLog struct {
	store SpendStore
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	pending map[BudgetKey]*pendingSpend
	spare   map[BudgetKey]*pendingSpend // the map the last flush emptied, reused
	// gen counts the swaps of pending. An Embedded counter keeps the
	// pending entry its spend went to last (cell.spend), which is used
	// only while its cell.spendGen is gen: a swap makes every entry kept
	// so stale at once, so none leads to an entry no longer pending.
	// (It replaced a map by the counter's address: a look-up, hashing a
	// word, for every budget of every settle.)
	gen uint64

	flushMu sync.Mutex          // one flush at a time (ticker and Close)
	deltas  map[BudgetKey]int64 // what a flush hands the store; under flushMu
	stop    chan struct{}
	done    chan struct{}
}

// NewSpendLog starts a SpendLog writing to s every every (DefaultFlushEvery
// when zero). Close stops it. A nil logger discards.
func NewSpendLog(s SpendStore, every time.Duration, log *slog.Logger) *SpendLog {
	if every <= 0 {
		every = DefaultFlushEvery
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &SpendLog{store: s, every: every, log: log,
		pending: map[BudgetKey]*pendingSpend{}, spare: map[BudgetKey]*pendingSpend{},
		deltas: map[BudgetKey]int64{},
		stop:   make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// pendingSpend is a counter's spend settled since the last flush.
type pendingSpend struct {
	key    BudgetKey
	micros int64
}

// Add records micros of settled spend on k.
func (l *SpendLog) Add(k BudgetKey, micros int64) {
	if micros == 0 {
		return
	}
	l.mu.Lock()
	l.entryLocked(k).micros += micros
	l.mu.Unlock()
}

// addAt is Add for spend settled on Embedded's counter c, found by c
// while c's spend goes to the same key (a counter's settles all do,
// unless its admissions' tags differ).
func (l *SpendLog) addAt(c *cell, k BudgetKey, micros int64) {
	if micros == 0 {
		return
	}
	l.mu.Lock()
	e := l.keptLocked(c)
	if e == nil || e.key != k {
		e = l.entryLocked(k)
		c.spend, c.spendGen = e, l.gen
	}
	e.micros += micros
	l.mu.Unlock()
}

// addKnown is addAt for spend whose entry is known already: the one
// counter c's spend went to last, when that was under tag. It reports
// false, adding nothing, when there is none (addAt then makes it).
//
// The tag is all it compares of the entry's key: a counter is kept in
// one place of Embedded's map, under one key for its life, and each of
// its settles adds to the BudgetKey of that key (the reservation's
// period start is the one its counter was found for, on the same day),
// so Scope, ID, Period and Start are always those of the entry found.
func (l *SpendLog) addKnown(c *cell, tag string, micros int64) bool {
	if micros == 0 {
		return true
	}
	l.mu.Lock()
	e := l.keptLocked(c)
	found := e != nil && e.key.Tag == tag
	if found {
		e.micros += micros
	}
	l.mu.Unlock()
	return found
}

// keptLocked returns the pending entry counter c's spend went to last;
// nil when there is none still pending.
func (l *SpendLog) keptLocked(c *cell) *pendingSpend {
	if c.spendGen != l.gen {
		return nil
	}
	return c.spend
}

// entryLocked returns k's pending entry, made when there is none.
func (l *SpendLog) entryLocked(k BudgetKey) *pendingSpend {
	e := l.pending[k]
	if e == nil {
		e = &pendingSpend{key: k}
		l.pending[k] = e
	}
	return e
}

func (l *SpendLog) run() {
	defer close(l.done)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*l.every+5*time.Second)
			if err := l.Flush(ctx); err != nil {
				l.log.Error("spend flush failed; will retry", "err", err)
			}
			cancel()
		}
	}
}

// Flush writes what is pending now. On failure the deltas stay pending
// for the next flush.
func (l *SpendLog) Flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return nil
	}
	batch := l.pending
	l.pending = l.spare
	l.spare = nil
	l.gen++ // the entries counters keep are batch's
	l.mu.Unlock()

	for k, e := range batch {
		l.deltas[k] = e.micros
	}
	err := l.store.AddSpend(ctx, l.deltas)
	clear(l.deltas)

	l.mu.Lock()
	if err != nil {
		for k, e := range l.pending { // spend added meanwhile
			if b := batch[k]; b != nil {
				b.micros += e.micros
			} else {
				batch[k] = e
			}
		}
		clear(l.pending)
		l.gen++ // the entries counters keep are merged into batch's
		l.spare = l.pending
		l.pending = batch
	} else {
		clear(batch)
		l.spare = batch
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("spend: %w", err)
	}
	return nil
}

// Close stops the background flusher and writes what is pending.
func (l *SpendLog) Close(ctx context.Context) error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	return l.Flush(ctx)
}
