package account

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SinkOptions tune a Sink; the zero value of each field picks its default.
type SinkOptions struct {
	// Queue bounds the records waiting for the writer (default 16384).
	// A record that finds it full is spilled, never waited for.
	Queue int
	// Batch is the most records written in one transaction (default 1000).
	Batch int
	// Writers is how many batches of a backlog are written at once
	// (default: the store's ParallelWrites, else 1). One writer waits
	// for each batch's round trips and commit in turn; where the
	// database has CPUs to spare, or its replies are slow to come, a
	// second writes meanwhile.
	Writers int
	// Interval is the longest a record waits for its batch to fill
	// (default 200ms): a crash loses no record, since a record is only
	// acknowledged to nobody, but the usage API lags by at most this.
	Interval time.Duration
	// SpillDir holds the spill files; required.
	SpillDir string
	// Retry is the first wait before the store is tried again after a
	// failure (default 1s), doubling up to 30s.
	Retry time.Duration
	// WriteTimeout bounds one batch write (default 10s).
	WriteTimeout time.Duration
	// Retention, when positive, deletes records older than this in the
	// background, PruneBatch at a time (default 5000), every PruneEvery
	// (default 10m).
	Retention  time.Duration
	PruneBatch int
	PruneEvery time.Duration
	// Log receives store failures; nil discards.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o *SinkOptions) defaults() {
	if o.Queue <= 0 {
		o.Queue = 16384
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Writers <= 0 {
		o.Writers = 1
	}
	if o.Interval <= 0 {
		o.Interval = 200 * time.Millisecond
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.PruneBatch <= 0 {
		o.PruneBatch = 5000
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Sink carries usage records from the request path to a RecordStore.
// Add never blocks on the store: records queue in memory and one
// goroutine writes them in batches. While the store fails, batches go to
// an append-only spill file (fsynced per batch) and are replayed in order
// once it answers again; records that find the queue full are spilled
// too. Close drains everything, to the store or to the spill file.
//
// The store's order is not the arrival order, and nothing needs it to be
// (the usage API pages by a record's time and request id): while the
// store answers, batches from the queue are written at once even when
// spilled records wait, and the writer replays the spill a batch at a
// time between them. A writer that sent new batches to the spill behind
// the old ones, to keep the order, turned a store that fell behind for a
// moment into one that never caught up: every record then paid the
// spill's encoding, write, read and decoding on the gateway's CPU
// (BENCHMARKS.md, "Cluster mode's spill").
//
// A record's RequestID is its unique key in the store, so a batch
// replayed after a write of unknown outcome is never counted twice.
type Sink struct {
	o     SinkOptions
	store RecordStore
	spill *spill

	// mu guards closed and queue. The queue is a slice the writer takes
	// whole and replaces with its spare, not a channel: a record is
	// copied once on its way in and written from where it lies, where a
	// channel copied it in, out, and into the batch (BENCHMARKS.md,
	// "recordcut3").
	mu     sync.Mutex
	closed bool
	queue  []Record      // waiting for the writer, at most o.Queue
	kick   chan struct{} // wakes the writer before its tick when a batch is waiting
	done   chan struct{}
	prune  chan struct{} // closed by Close: stops the retention loop
	pruned chan struct{}

	// The writers' (hmu): whether the store failed last time, and when
	// to try it again (retry doubles up to 30s).
	hmu     sync.Mutex
	failing bool
	retry   time.Duration
	nextTry time.Time
	// replaying counts the records replayed since the spill was last
	// empty, for one log line when it is again.
	replaying int

	written, spilled, replayed, dropped atomic.Uint64
}

// NewSink starts a Sink writing to store. Spill files left by an earlier
// process in o.SpillDir are replayed first.
func NewSink(store RecordStore, o SinkOptions) (*Sink, error) {
	if ps, ok := store.(ParallelRecordStore); ok && o.Writers <= 0 {
		o.Writers = ps.ParallelWrites()
	}
	o.defaults()
	sp, err := openSpill(o.SpillDir)
	if err != nil {
		return nil, err
	}
	s := &Sink{o: o, store: store, spill: sp, kick: make(chan struct{}, 1), retry: o.Retry,
		done: make(chan struct{}), prune: make(chan struct{}), pruned: make(chan struct{})}
	go s.run()
	if o.Retention > 0 {
		go s.retain()
	} else {
		close(s.pruned)
	}
	return s, nil
}

// Add hands a record over. It never blocks on the store; when the queue
// is full the record is appended to the spill file instead (no fsync on
// this path: the writer syncs the file at its next tick).
func (s *Sink) Add(r Record) { s.Keep(&r) }

// Keep is Add for a record its caller holds where it lies: *r is copied
// once, into the queue (or the spill file), and not kept. A Record is
// some 370 bytes, and Add's argument is a copy of its own, made for the
// call, which a request's record (filled in place, handed over once)
// need not pay for.
func (s *Sink) Keep(r *Record) {
	s.mu.Lock()
	if s.closed || len(s.queue) >= s.o.Queue {
		late := s.closed // a request that outlived Close
		s.mu.Unlock()
		s.spillNow([]Record{*r}, late)
		return
	}
	// Room first, then the copy: append(s.queue, *r) copied *r to the
	// stack before growing the slice, and from there into it.
	n := len(s.queue) + 1
	if n > cap(s.queue) {
		s.queue = slices.Grow(s.queue, 1)
	}
	s.queue = s.queue[:n]
	s.queue[n-1] = *r
	s.mu.Unlock()
	if n >= s.o.Batch {
		s.wake()
	}
}

// wake asks the writer to drain the queue now rather than at its tick.
func (s *Sink) wake() {
	select {
	case s.kick <- struct{}{}:
	default: // already asked
	}
}

// Stats of the sink, for metrics.
func (s *Sink) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}
func (s *Sink) Written() uint64    { return s.written.Load() }
func (s *Sink) Spilled() uint64    { return s.spilled.Load() }
func (s *Sink) Replayed() uint64   { return s.replayed.Load() }
func (s *Sink) Dropped() uint64    { return s.dropped.Load() }
func (s *Sink) SpillPending() bool { return s.spill.pending() }

// Close stops accepting records, writes what is queued (to the store, or
// to the spill file if the store fails), tries once more to replay the
// spill file, and waits for the writer until ctx ends. Records still
// spilled are replayed by the next process using the same SpillDir.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.prune)
		s.wake()
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-s.pruned
	return s.spill.close()
}

func (s *Sink) spillNow(rs []Record, sync bool) {
	if err := s.spill.append(rs, sync); err != nil {
		s.dropped.Add(uint64(len(rs)))
		s.o.Log.Error("usage records lost: cannot write the spill file", "records", len(rs), "error", err.Error())
		return
	}
	s.spilled.Add(uint64(len(rs)))
}

// run is the writer. Add wakes it when a batch's worth is queued, and
// it writes the full batches; at each tick it writes whatever is queued.
// It sleeps in between rather than waking for every record, which would
// cost each request a goroutine switch. While spilled records wait and
// the store answers, it does not sleep: it replays one batch of them
// after each look at the queue, so the queue is served first and the
// spill drains as fast as the store takes it.
func (s *Sink) run() {
	defer close(s.done)
	var spare []Record // the queue the writer took last, for Add's next
	tick := time.NewTicker(s.o.Interval)
	defer tick.Stop()
	for open := true; open; {
		all := false
		if s.replayDue() {
			select {
			case <-tick.C:
				all = true
			default:
			}
		} else {
			select {
			case <-s.kick:
			case <-tick.C:
				all = true
			}
		}
		spare, open = s.drain(spare, all)
		if all {
			s.flushSpill()
		}
		if s.replayDue() {
			limit := s.o.Batch
			if !open {
				limit = 0 // closing: the whole spill, if the store takes it
			}
			s.replay(limit)
		}
	}
}

// flushSpill fsyncs the records that requests spilled since the last
// tick (spill.append says why they wait for it).
func (s *Sink) flushSpill() {
	if err := s.spill.flush(); err != nil {
		s.o.Log.Error("usage records: cannot sync the spill file", "error", err.Error())
	}
}

// storeDue reports whether the store may be tried now: it answered last
// time, or the wait after its failure is over.
func (s *Sink) storeDue() bool {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return !s.failing || !s.o.Now().Before(s.nextTry)
}

// replayDue reports whether spilled records wait and the store may be
// tried.
func (s *Sink) replayDue() bool { return s.spill.pending() && s.storeDue() }

// storeFailed notes a failed write: the store is not tried again before
// the retry wait, which doubles with each failure up to 30s.
func (s *Sink) storeFailed() {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	now := s.o.Now()
	if s.failing && now.Before(s.nextTry) {
		return // another writer's batch failed at the same time: one failure
	}
	s.failing = true
	s.nextTry = now.Add(s.retry)
	s.retry = min(s.retry*2, 30*time.Second)
}

// storeAnswered notes a write that succeeded.
func (s *Sink) storeAnswered() {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.failing = false
	s.retry = s.o.Retry
}

// drain takes what is queued, leaving spare (emptied) in its place, and
// writes it a full batch at a time; with all, or once the sink is
// closed, the last partial batch too, otherwise that stays queued, ahead
// of what comes next. It returns the buffer it took, for the next call's
// spare, and reports false once the sink is closed and everything
// queued is written.
func (s *Sink) drain(spare []Record, all bool) ([]Record, bool) {
	batch := s.o.Batch
	s.mu.Lock()
	closed := s.closed
	q := s.queue
	n := len(q)
	if !all && !closed {
		n -= n % batch
	}
	s.queue = append(spare[:0], q[n:]...) // the partial batch left, if any
	s.mu.Unlock()
	s.writeAll(q[:n])
	if cap(q) > s.o.Batch*spareBatches && n < cap(q)/4 {
		// A backlog's buffer, now mostly empty: let it go (spareBatches).
		return nil, !closed
	}
	clear(q) // the records' bodies and strings are not kept alive by the spare
	return q[:0], !closed
}

// spareBatches bounds the buffer drain keeps for the next queue, in
// batches, once the queue it took is less than a quarter full. A queue
// grows to what a backlog needs (up to SinkOptions.Queue: 16,384 records
// by default, 6 MiB), and the collector scans a buffer of records whole,
// its empty slots as well, at every cycle. Kept after the backlog as the
// queue and its spare, two such buffers would be 12 MiB scanned by every
// collection, where a replica that never fell behind has 3 MiB live in
// all (BENCHMARKS.md, "Spilled records replayed as fresh ones"). A queue
// that stays busy keeps its buffer.
const spareBatches = 4

// writeAll writes rs a batch at a time, up to o.Writers batches at once,
// and returns when every batch is stored or spilled.
func (s *Sink) writeAll(rs []Record) {
	batch := s.o.Batch
	batches := (len(rs) + batch - 1) / batch
	nth := func(i int) []Record {
		j := min((i+1)*batch, len(rs))
		return rs[i*batch : j : j] // capped: a store that appends cannot reach the next batch
	}
	if s.o.Writers <= 1 || batches <= 1 {
		for i := range batches {
			s.write(nth(i))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(s.o.Writers, batches) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < batches; i = int(next.Add(1) - 1) {
				s.write(nth(i))
			}
		})
	}
	wg.Wait()
}

// write stores one batch, or spills it when the store fails or is
// waited for after a failure.
func (s *Sink) write(batch []Record) {
	if s.storeDue() {
		ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
		var err error
		if fs, ok := s.store.(FreshRecordStore); ok {
			err = fs.WriteFreshRecords(ctx, batch) // from the queue: never handed to the store before
		} else {
			err = s.store.WriteRecords(ctx, batch)
		}
		cancel()
		if err == nil {
			s.storeAnswered()
			s.written.Add(uint64(len(batch)))
			return
		}
		s.storeFailed()
		s.o.Log.Warn("usage records: store unavailable, spilling to disk", "records", len(batch), "error", err.Error())
	}
	s.spillNow(batch, true)
}

// replay writes spilled records to the store in their order, at most
// limit of them (limit ≤ 0: all).
func (s *Sink) replay(limit int) {
	n, err := s.spill.replay(s.o.Batch, limit, func(rs []Record) error {
		ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
		defer cancel()
		return s.store.WriteRecords(ctx, rs)
	}, func(bad int) {
		s.dropped.Add(uint64(bad))
		s.o.Log.Error("usage records lost: unreadable lines in a spill file", "lines", bad)
	})
	s.replayed.Add(uint64(n))
	s.written.Add(uint64(n))
	s.replaying += n
	if err != nil {
		s.storeFailed()
		return
	}
	if n > 0 {
		s.storeAnswered()
	}
	if s.replaying > 0 && !s.spill.pending() {
		s.o.Log.Info("usage records replayed from the spill file", "records", s.replaying)
		s.replaying = 0
	}
}

// retain deletes records older than the retention, a batch at a time.
func (s *Sink) retain() {
	defer close(s.pruned)
	t := time.NewTicker(s.o.PruneEvery)
	defer t.Stop()
	for {
		s.pruneOnce()
		select {
		case <-s.prune:
			return
		case <-t.C:
		}
	}
}

func (s *Sink) pruneOnce() {
	before := s.o.Now().Add(-s.o.Retention)
	for {
		select {
		case <-s.prune:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.o.WriteTimeout)
		n, err := s.store.PruneRecords(ctx, before, s.o.PruneBatch)
		cancel()
		if err != nil {
			s.o.Log.Warn("usage retention: prune failed", "error", err.Error())
			return
		}
		if n < s.o.PruneBatch {
			return
		}
	}
}
