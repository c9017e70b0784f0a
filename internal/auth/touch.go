package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// touchResolution is how finely last-used times are kept: a key used many
// times a second costs the request path one atomic load per use, and a
// store write at most once per flush.
const touchResolution = int64(time.Second)

// maxUnflushed bounds the last-used times kept while the store refuses
// them; past it the oldest batch is dropped (last-used is informational,
// memory is not).
const maxUnflushed = 100_000

// toucher batches last-used times in memory for Keys' flush loop, so the
// request path never writes to the store.
type toucher struct {
	mu        sync.Mutex
	pending   []*entry             // each at most once (entry.queued)
	unflushed map[string]time.Time // key ID → last use, failed writes kept for the next flush
}

// use records that e was used at now (unix ns). The common case, a key
// already recorded within touchResolution, is one atomic load.
func (t *toucher) use(e *entry, now int64) {
	if now-e.used.Load() < touchResolution {
		return
	}
	e.used.Store(now)
	if e.queued.CompareAndSwap(false, true) {
		t.mu.Lock()
		t.pending = append(t.pending, e)
		t.mu.Unlock()
	}
}

// take returns the batch to write: what failed last time plus the uses
// recorded since.
func (t *toucher) take() map[string]time.Time {
	t.mu.Lock()
	pending := t.pending
	t.pending = nil
	batch := t.unflushed
	t.unflushed = nil
	t.mu.Unlock()
	if batch == nil {
		batch = make(map[string]time.Time, len(pending))
	}
	for _, e := range pending {
		// Clear queued before reading the time: a use racing with this
		// either shows in the time read here or queues the entry again.
		e.queued.Store(false)
		at := time.Unix(0, e.used.Load()).UTC()
		if prev, ok := batch[e.p.KeyID]; !ok || at.After(prev) {
			batch[e.p.KeyID] = at
		}
	}
	return batch
}

// keep holds a batch the store did not take for the next flush.
func (t *toucher) keep(batch map[string]time.Time) bool {
	if len(batch) > maxUnflushed {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unflushed == nil {
		t.unflushed = batch
	} else {
		for id, at := range batch {
			if prev, ok := t.unflushed[id]; !ok || at.After(prev) {
				t.unflushed[id] = at
			}
		}
	}
	return true
}

// flush writes the recorded uses with one TouchKeys call.
func (k *Keys) flush(ctx context.Context) error {
	batch := k.touch.take()
	if len(batch) == 0 {
		return nil
	}
	err := k.store.TouchKeys(ctx, batch)
	if err != nil {
		kept := k.touch.keep(batch)
		k.log.Warn("auth: recording keys' last use failed", slog.Int("keys", len(batch)),
			slog.Bool("kept_for_retry", kept), slog.Any("error", err))
	}
	return err
}

// flushLoop writes last-used times every FlushEvery until k closes, then
// once more.
func (k *Keys) flushLoop(every time.Duration) {
	defer k.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			ctx, cancel := context.WithTimeout(k.ctx, k.lookupTimeout)
			k.flush(ctx)
			cancel()
		case <-k.ctx.Done():
			// k.ctx is over, but the last batch still deserves a bounded
			// try.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(k.ctx), k.lookupTimeout)
			k.closeErr = k.flush(ctx)
			cancel()
			return
		}
	}
}
