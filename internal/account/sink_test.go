package account

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/limit"
)

// memStore is a RecordStore in memory whose writes can be made to fail
// or to block, standing in for a database going away.
type memStore struct {
	mu      sync.Mutex
	ids     []string // in write order, duplicates skipped as a store does
	seen    map[string]bool
	fail    bool
	block   chan struct{} // non-nil: writes wait for it to close
	batches int
	pruned  []time.Time
}

func newMemStore() *memStore { return &memStore{seen: map[string]bool{}} }

func (m *memStore) WriteRecords(ctx context.Context, rs []Record) error {
	m.mu.Lock()
	block, fail := m.block, m.fail
	m.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("database is down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches++
	for _, r := range rs {
		if !m.seen[r.RequestID] {
			m.seen[r.RequestID] = true
			m.ids = append(m.ids, r.RequestID)
		}
	}
	return nil
}

func (m *memStore) PruneRecords(_ context.Context, before time.Time, limit int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruned = append(m.pruned, before)
	return 0, nil
}

func (m *memStore) setFail(v bool) { m.mu.Lock(); m.fail = v; m.mu.Unlock() }
func (m *memStore) stored() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ids...)
}

func rec(i int) Record {
	return Record{RequestID: fmt.Sprintf("gh-%05d", i), Time: time.Unix(1700000000, 0).UTC(), Status: 200, Cost: limit.Micros(i)}
}

func ids(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, rec(i).RequestID)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSinkWritesInBatchesAndCloseDrains(t *testing.T) {
	st := newMemStore()
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Batch: 10, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		s.Add(rec(i))
	}
	// Two full batches go at once; the last five wait for the interval
	// (an hour) and must be written by Close.
	waitFor(t, "two batches", func() bool { return len(st.stored()) == 20 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids(0, 25), st.stored()); diff != "" {
		t.Fatalf("stored records (-want +got):\n%s", diff)
	}
	if s.Written() != 25 || s.Spilled() != 0 || s.Dropped() != 0 {
		t.Fatalf("stats: written %d spilled %d dropped %d", s.Written(), s.Spilled(), s.Dropped())
	}
}

// TestSinkSpillsWhileStoreDownAndReplaysInOrder: batches that fail are
// spilled, and so are those that come while the store is waited for;
// once it answers, the spill is replayed in the order it was written,
// and records that arrive meanwhile are written too, not lost behind it.
func TestSinkSpillsWhileStoreDownAndReplaysInOrder(t *testing.T) {
	st := newMemStore()
	st.setFail(true)
	dir := t.TempDir()
	s, err := NewSink(st, SinkOptions{SpillDir: dir, Batch: 7, Interval: 5 * time.Millisecond, Retry: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		s.Add(rec(i))
	}
	waitFor(t, "all 50 spilled", func() bool { return s.Spilled() == 50 })
	if !s.SpillPending() {
		t.Fatal("spill should be pending while the store is down")
	}
	st.setFail(false)
	for i := 50; i < 60; i++ { // arrive while the spill is pending
		s.Add(rec(i))
	}
	waitFor(t, "replay", func() bool { return len(st.stored()) == 60 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := st.stored()
	var spilled []string
	for _, id := range got {
		if id < rec(50).RequestID {
			spilled = append(spilled, id)
		}
	}
	if diff := cmp.Diff(ids(0, 50), spilled); diff != "" {
		t.Fatalf("order of the replayed records (-want +got):\n%s", diff)
	}
	// Those that came before the retry wait was over were spilled too.
	if s.Replayed() < 50 || s.Written() != 60 || s.Dropped() != 0 {
		t.Fatalf("replayed %d written %d dropped %d; want at least 50, 60, 0", s.Replayed(), s.Written(), s.Dropped())
	}
	left, _ := filepath.Glob(filepath.Join(dir, "spill-*"))
	if len(left) != 0 {
		t.Fatalf("spill files left after a full replay: %v", left)
	}
}

// callStore is a FreshRecordStore that notes each write as "fresh" or
// "replay" with its size, and runs onReplay (once) inside the first
// replayed write, as a request adding records at that moment would.
type callStore struct {
	memStore
	calls    []string
	onReplay func()
}

func (c *callStore) note(kind string, n int) {
	c.mu.Lock()
	c.calls = append(c.calls, fmt.Sprintf("%s %d", kind, n))
	c.mu.Unlock()
}

func (c *callStore) WriteRecords(ctx context.Context, rs []Record) error {
	err := c.memStore.WriteRecords(ctx, rs)
	if err == nil {
		c.note("replay", len(rs))
		if f := c.onReplay; f != nil {
			c.onReplay = nil
			f()
		}
	}
	return err
}

func (c *callStore) WriteFreshRecords(ctx context.Context, rs []Record) error {
	err := c.memStore.WriteRecords(ctx, rs)
	if err == nil {
		c.note("fresh", len(rs))
	}
	return err
}

// TestSinkServesTheQueueBetweenReplayBatches: a spill of three batches
// is replayed one batch at a time, and a batch that fills the queue
// meanwhile is written between two of them, not spilled behind them.
// The writer that replayed the whole spill before it looked at the
// queue again let a queue that overflowed once overflow for good.
func TestSinkServesTheQueueBetweenReplayBatches(t *testing.T) {
	st := &callStore{memStore: *newMemStore()}
	st.setFail(true)
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Batch: 5, Interval: 5 * time.Millisecond, Retry: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 15 {
		s.Add(rec(i))
	}
	waitFor(t, "15 spilled", func() bool { return s.Spilled() == 15 })
	st.mu.Lock()
	st.onReplay = func() {
		for i := 15; i < 20; i++ {
			s.Add(rec(i))
		}
	}
	st.fail = false
	st.mu.Unlock()
	waitFor(t, "20 stored", func() bool { return len(st.stored()) == 20 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if diff := cmp.Diff([]string{"replay 5", "fresh 5", "replay 5", "replay 5"}, st.calls); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	if s.Spilled() != 15 || s.Replayed() != 15 || s.Written() != 20 {
		t.Fatalf("spilled %d replayed %d written %d; want 15, 15, 20", s.Spilled(), s.Replayed(), s.Written())
	}
}

func TestSinkFullQueueSpillsWithoutBlocking(t *testing.T) {
	st := newMemStore()
	st.block = make(chan struct{})
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Queue: 2, Batch: 1, Interval: time.Millisecond, Retry: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			s.Add(rec(i))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Add blocked on a stalled store")
	}
	if s.Spilled() == 0 {
		t.Fatal("a full queue should spill")
	}
	st.mu.Lock()
	close(st.block)
	st.block = nil
	st.mu.Unlock()
	waitFor(t, "every record stored", func() bool { return len(st.stored()) == 100 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSinkReplaysAnEarlierProcessSpill(t *testing.T) {
	dir := t.TempDir()
	down := newMemStore()
	down.setFail(true)
	first, err := NewSink(down, SinkOptions{SpillDir: dir, Interval: time.Millisecond, Retry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		first.Add(rec(i))
	}
	if err := first.Close(context.Background()); err != nil { // SIGTERM with the database down
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "spill-*"))
	if len(files) != 1 {
		t.Fatalf("want one spill file after closing with the store down, got %v", files)
	}
	// A torn last line, as a crash mid-write leaves it.
	f, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"request_id":"gh-torn","ti`)
	f.Close()

	up := newMemStore()
	// Batches of 7: the earlier file is replayed over several of the
	// writer's turns, each going on from where the last stopped.
	second, err := NewSink(up, SinkOptions{SpillDir: dir, Batch: 7, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replay of the earlier file", func() bool { return len(up.stored()) == 30 })
	if err := second.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids(0, 30), up.stored()); diff != "" {
		t.Fatalf("replayed (-want +got):\n%s", diff)
	}
	if second.Dropped() != 1 {
		t.Fatalf("the torn line should count as dropped, got %d", second.Dropped())
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "spill-*")); len(files) != 0 {
		t.Fatalf("replayed file not removed: %v", files)
	}
}

func TestSinkRetentionPrunes(t *testing.T) {
	st := newMemStore()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Retention: 90 * 24 * time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a prune", func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.pruned) > 0 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := now.Add(-90 * 24 * time.Hour); !st.pruned[0].Equal(want) {
		t.Fatalf("pruned before %v, want %v", st.pruned[0], want)
	}
}

func TestRecordJSONRoundTrip(t *testing.T) {
	r := Record{RequestID: "gh-1", Time: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), Model: "m", Status: 429,
		Cost: 1250, UsageSource: SourceEstimated, Labels: map[string]string{"team": "a"}, Stream: true}
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := got.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(b), `"cost_usd":"0.001250"`) || !strings.Contains(string(b), `"time":"2026-01-02T03:04:05.0000006Z"`) {
		t.Fatalf("wire form: %s", b)
	}
}

func TestParseUSD(t *testing.T) {
	for in, want := range map[string]limit.Micros{"": 0, "0.000000": 0, "1": 1e6, "0.5": 500000, "12.345678": 12345678, "-0.000001": -1} {
		got, err := ParseUSD(in)
		if err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "1.2345678", ".5", "1.-2", "1e3"} {
		if _, err := ParseUSD(bad); err == nil {
			t.Errorf("ParseUSD(%q) accepted", bad)
		}
	}
}

// freshStore is a memStore that also takes fresh batches, and notes any
// fresh batch holding a record some earlier write (failed or not) was
// handed: the sink must never vouch for such a batch.
type freshStore struct {
	*memStore
	mu               sync.Mutex
	handed           map[string]bool
	freshIDs         map[string]bool
	checked          int
	freshWithHandled []string
}

func (f *freshStore) note(rs []Record, fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !fresh {
		f.checked++
	}
	for _, r := range rs {
		if fresh && f.handed[r.RequestID] {
			f.freshWithHandled = append(f.freshWithHandled, r.RequestID)
		}
		f.handed[r.RequestID] = true
		f.freshIDs[r.RequestID] = fresh
	}
}

func (f *freshStore) WriteRecords(ctx context.Context, rs []Record) error {
	f.note(rs, false)
	return f.memStore.WriteRecords(ctx, rs)
}

func (f *freshStore) WriteFreshRecords(ctx context.Context, rs []Record) error {
	f.note(rs, true)
	return f.memStore.WriteRecords(ctx, rs)
}

// TestSinkFreshBatches: batches taken from the queue go to a
// FreshRecordStore's WriteFreshRecords; a batch that failed and is
// replayed from the spill file goes to WriteRecords, which looks for
// its ids among the stored ones.
func TestSinkFreshBatches(t *testing.T) {
	st := &freshStore{memStore: newMemStore(), handed: map[string]bool{}, freshIDs: map[string]bool{}}
	st.setFail(true)
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Batch: 5, Interval: 5 * time.Millisecond, Retry: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // two full batches, both failing: spilled
		s.Add(rec(i))
	}
	waitFor(t, "10 spilled", func() bool { return s.Spilled() == 10 })
	st.setFail(false)
	waitFor(t, "the replay", func() bool { return len(st.stored()) == 10 })
	for i := 10; i < 20; i++ {
		s.Add(rec(i))
	}
	waitFor(t, "20 stored", func() bool { return len(st.stored()) == 20 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids(0, 20), st.stored()); diff != "" {
		t.Fatalf("stored (-want +got):\n%s", diff)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.freshWithHandled) > 0 {
		t.Fatalf("fresh batches held records handed over before: %v", st.freshWithHandled)
	}
	if st.checked == 0 {
		t.Fatal("the replay did not go through WriteRecords")
	}
	for _, id := range ids(10, 20) { // queued while the store was up, nothing spilled
		if !st.freshIDs[id] {
			t.Errorf("%s, queued with the store up, was not written fresh", id)
		}
	}
}

// appendingStore records each batch's ids and then appends to the slice
// it was given, as a store is free to: the sink must not let that reach
// records it has not written yet.
type appendingStore struct {
	memStore
	sizes []int
}

func (a *appendingStore) WriteRecords(ctx context.Context, rs []Record) error {
	a.sizes = append(a.sizes, len(rs))
	if err := a.memStore.WriteRecords(ctx, rs); err != nil {
		return err
	}
	_ = append(rs, Record{RequestID: "scribbled"})
	return nil
}

// TestSinkDrainQueue drives the writer's drain by hand (no writer
// goroutine): a kick writes the full batches and leaves the partial one
// queued ahead of later records; a tick or Close writes everything; the
// order holds throughout, each batch at most Batch long, and a store
// appending to its batch does not change the next.
func TestSinkDrainQueue(t *testing.T) {
	sp, err := openSpill(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &appendingStore{memStore: *newMemStore()}
	s := &Sink{o: SinkOptions{Batch: 3, Queue: 100}, store: st, spill: sp, kick: make(chan struct{}, 1)}
	s.o.defaults()
	for i := range 7 {
		s.Add(rec(i))
	}
	spare, open := s.drain(nil, false) // a kick: 0-2 and 3-5; 6 stays
	if !open || s.Depth() != 1 {
		t.Fatalf("after a kick: open %v, %d queued; want true, 1", open, s.Depth())
	}
	s.Add(rec(7))
	s.Add(rec(8))
	s.Add(rec(9))
	spare, _ = s.drain(spare, false) // 6-8; 9 stays
	spare, _ = s.drain(spare, true)  // a tick: 9
	for i := 10; i < 15; i++ {
		s.Add(rec(i))
	}
	s.mu.Lock() // what Close does before it waits for the writer
	s.closed = true
	s.mu.Unlock()
	if _, open := s.drain(spare, false); open || s.Depth() != 0 {
		t.Fatalf("after Close: open %v, %d queued; want false, 0", open, s.Depth())
	}
	s.Add(rec(15)) // late: spilled, not queued
	if s.Spilled() != 1 || s.Depth() != 0 {
		t.Fatalf("a late record: %d spilled, %d queued; want 1, 0", s.Spilled(), s.Depth())
	}
	if diff := cmp.Diff(ids(0, 15), st.stored()); diff != "" {
		t.Fatalf("stored (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3, 3, 3, 1, 3, 2}, st.sizes); diff != "" {
		t.Fatalf("batch sizes (-want +got):\n%s", diff)
	}
}

// TestSinkKeepCopies: Keep queues a copy of the record, so the caller's
// record may change or go after the call; Add is Keep of its argument.
func TestSinkKeepCopies(t *testing.T) {
	st := newMemStore()
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r := rec(1)
	s.Keep(&r)
	r.RequestID = "gh-changed"
	s.Keep(&r)
	r = rec(2)
	s.Add(r)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := st.stored(), []string{rec(1).RequestID, "gh-changed", rec(2).RequestID}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
}

// TestSpillCountsAnUnreadableLineOnce: a replay that a failing batch
// stops is started again from that batch, and an unreadable line before
// the failure is reported by the replay that gets past it, once.
func TestSpillCountsAnUnreadableLineOnce(t *testing.T) {
	sp, err := openSpill(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.append([]Record{rec(0), rec(1)}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.own.WriteString("{not json\n"); err != nil {
		t.Fatal(err)
	}
	sp.ownSize += int64(len("{not json\n"))
	if err := sp.append([]Record{rec(2), rec(3)}, true); err != nil {
		t.Fatal(err)
	}
	bad := 0
	var stored []string
	failNext := true
	write := func(rs []Record) error {
		if failNext {
			failNext = false
			return errors.New("down")
		}
		for _, r := range rs {
			stored = append(stored, r.RequestID)
		}
		return nil
	}
	if n, err := sp.replay(3, 0, write, func(n int) { bad += n }); err == nil || n != 0 {
		t.Fatalf("first replay: %d written, error %v; want 0 and the write's error", n, err)
	}
	if n, err := sp.replay(3, 0, write, func(n int) { bad += n }); err != nil || n != 4 {
		t.Fatalf("second replay: %d written, error %v; want 4, nil", n, err)
	}
	if bad != 1 {
		t.Errorf("unreadable lines reported %d times, want once", bad)
	}
	if diff := cmp.Diff(ids(0, 4), stored); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	if sp.pending() {
		t.Error("spill still pending after a full replay")
	}
}

// gateStore holds every write until the test opens the gate, counting
// how many wait at once.
type gateStore struct {
	memStore
	gate                chan struct{}
	inflight, maxAtOnce int
}

func (g *gateStore) WriteRecords(ctx context.Context, rs []Record) error {
	g.mu.Lock()
	g.inflight++
	g.maxAtOnce = max(g.maxAtOnce, g.inflight)
	g.mu.Unlock()
	<-g.gate
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
	return g.memStore.WriteRecords(ctx, rs)
}

func (g *gateStore) ParallelWrites() int { return 3 }

// TestSinkWritesABacklogInParallel: a store that takes several batches
// at once gets as many of a backlog as it says, each record once.
func TestSinkWritesABacklogInParallel(t *testing.T) {
	st := &gateStore{memStore: *newMemStore(), gate: make(chan struct{})}
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Batch: 4, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if s.o.Writers != 3 {
		t.Fatalf("Writers %d, want the store's 3", s.o.Writers)
	}
	s.mu.Lock() // ten batches queued before the writer looks: a backlog
	for i := range 40 {
		s.queue = append(s.queue, rec(i))
	}
	s.mu.Unlock()
	s.wake()
	waitFor(t, "three batches written at once", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.maxAtOnce == 3
	})
	close(st.gate)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := st.stored()
	slices.Sort(got)
	if diff := cmp.Diff(ids(0, 40), got); diff != "" {
		t.Fatalf("stored (-want +got):\n%s", diff)
	}
	if s.Written() != 40 || s.Spilled() != 0 {
		t.Fatalf("written %d spilled %d, want 40, 0", s.Written(), s.Spilled())
	}
}

// TestSpillSyncsOnlyWhenAsked: records spilled from a full queue are not
// fsynced one by one (the cost of an fsync every other request, when
// they were); a batch the writer spills is, with what came before it,
// and so is what is left at the writer's tick (flush) and at close.
func TestSpillSyncsOnlyWhenAsked(t *testing.T) {
	sp, err := openSpill(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	syncs := func(want int, after string) {
		t.Helper()
		if sp.syncs != want {
			t.Fatalf("after %s: %d fsyncs, want %d", after, sp.syncs, want)
		}
	}
	for i := range 5 {
		if err := sp.append([]Record{rec(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	syncs(0, "five requests' records")
	if err := sp.flush(); err != nil {
		t.Fatal(err)
	}
	syncs(1, "the tick's flush")
	if err := sp.flush(); err != nil {
		t.Fatal(err)
	}
	syncs(1, "a second flush with nothing new")
	if err := sp.append([]Record{rec(5), rec(6)}, true); err != nil {
		t.Fatal(err)
	}
	syncs(2, "a batch the writer spilled")
	if err := sp.append([]Record{rec(7)}, false); err != nil {
		t.Fatal(err)
	}
	if err := sp.close(); err != nil {
		t.Fatal(err)
	}
	syncs(3, "close with a record unsynced")
}

// TestSinkFlushesSpilledRecordsAtItsTick: what requests spilled while
// the queue was full is fsynced by the writer's next tick, with the
// store answering all along, not left to the page cache until the next
// failure or close.
func TestSinkFlushesSpilledRecordsAtItsTick(t *testing.T) {
	st := newMemStore()
	// A batch larger than the queue: Add never wakes the writer, whose
	// tick alone takes the queue and flushes the spill.
	s, err := NewSink(st, SinkOptions{SpillDir: t.TempDir(), Queue: 1, Batch: 1000, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		s.Add(rec(i))
	}
	if s.Spilled() != 9 {
		t.Fatalf("%d records spilled, want 9 (a queue of one)", s.Spilled())
	}
	waitFor(t, "the spilled records fsynced", func() bool {
		s.spill.mu.Lock()
		defer s.spill.mu.Unlock()
		return s.spill.syncs > 0 && !s.spill.dirty
	})
	waitFor(t, "every record stored", func() bool { return len(st.stored()) == 10 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSinkLetsABacklogsBufferGo: the buffer a backlog grew the queue to
// is not kept once the queue it holds is mostly empty (spareBatches),
// while a busy queue's is, and nothing is lost either way.
func TestSinkLetsABacklogsBufferGo(t *testing.T) {
	sp, err := openSpill(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore()
	s := &Sink{o: SinkOptions{Batch: 10, Queue: 1000}, store: st, spill: sp, kick: make(chan struct{}, 1)}
	s.o.defaults()
	next := 0
	add := func(n int) {
		for range n {
			s.Add(rec(next))
			next++
		}
	}
	add(500) // a backlog: the queue grows to hold 500
	spare, _ := s.drain(nil, true)
	if cap(spare) < 500 {
		t.Fatalf("the backlog's buffer, %d records, is not the spare: cap %d", 500, cap(spare))
	}
	// Quiet ticks: the queue and the spare take turns as each other, so
	// the backlog's buffer is the queue at the first and let go at the
	// second.
	for tick := range 2 {
		add(30)
		spare, _ = s.drain(spare, true)
		s.mu.Lock()
		queueCap := cap(s.queue)
		s.mu.Unlock()
		if tick == 1 && (cap(spare) > 10*spareBatches || queueCap > 10*spareBatches) {
			t.Fatalf("after two quiet ticks the sink holds buffers of %d and %d records", cap(spare), queueCap)
		}
	}
	add(30)
	spare, _ = s.drain(spare, true)
	if cap(spare) == 0 {
		t.Fatal("a small queue's buffer was not kept as the spare")
	}
	if got := len(st.stored()); got != next {
		t.Fatalf("stored %d records, want %d", got, next)
	}
}
