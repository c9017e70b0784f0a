package limit

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure an Embedded admitter. The zero value is usable: real
// clock, no persistence.
type Options struct {
	// Now is the clock; time.Now when nil. Tests inject a fake one.
	Now func() time.Time
	// Spend persists settled spend and seeds the budget counters at
	// start; nil keeps spend in memory only (lost on restart).
	Spend SpendStore
	// FlushEvery is how often settled spend is written to Spend
	// (DefaultFlushEvery when zero): the crash-loss window.
	FlushEvery time.Duration
	// SweepEvery is how often idle buckets and past periods' counters
	// are dropped from memory (one minute when zero).
	SweepEvery time.Duration
	Log        *slog.Logger
}

// Embedded is an in-process Admitter for one gateway process.
//
// Counters live in a sharded map, each under its own mutex; an admission
// locks only the counters it touches, in one canonical order (sorted by
// key), so admissions sharing counters serialise on those alone and can
// never deadlock. There is no lock shared by all requests.
type Embedded struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [nShards]shard
	cal    calendar
	loaded map[BudgetKey]int64 // spend persisted before start; read-only after New
	spend  *SpendLog
	// opBufs holds the op arrays of admissions in progress (*[maxOps]op).
	// Not a local array of Admit: about 2 KB there put the handler
	// 8 KB deep during admission, so every request's goroutine grew to a
	// 16 KiB stack, which a streaming request then keeps for the whole
	// stream (the runtime shrinks a stack only when under a quarter of it
	// is in use).
	opBufs sync.Pool

	stop chan struct{}
	done chan struct{}
}

// maxOps is how many counters an admission checks without allocating.
const maxOps = 12

const nShards = 64

type shard struct {
	mu sync.RWMutex
	m  map[cellKey]*cell
	// hints holds, by the ID of an admission's first counter, the
	// counters that owner's admissions found last (see lockAll). The
	// sweeper empties it with the counters it drops.
	hints map[string]*hint
}

// maxHint is how many counters a hint keeps: a key's rates and budgets,
// its project's, and a few per-model rates.
const maxHint = 8

// hint is the counters an owner's admissions found, by key: one map
// look-up by a string finds them all, where each counter's own look-up
// hashes its whole key (a struct of four strings). It is never changed
// once kept, and it is only a hint: a counter in it is used only while
// it is live (not swept), which lockAll checks under the counter's lock
// as it does for any counter.
type hint struct {
	n     int
	keys  [maxHint]cellKey
	cells [maxHint]*cell
}

type cellKind uint8

const (
	cellRequests cellKind = iota
	cellTokens
	cellBudget
)

// cellKey identifies a counter. It is comparable, so map lookups build no
// strings.
type cellKey struct {
	kind   cellKind
	scope  Scope
	id     string
	period Period
	start  string
}

// compare orders keys by kind, scope, ID, period and start. Field by
// field with an early return: cmp.Or takes every comparison as an
// argument, so it compared the strings of keys whose kinds already
// differed — most of an admission's pairs.
func (a *cellKey) compare(b *cellKey) int {
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	if c := cmp.Compare(a.scope, b.scope); c != 0 {
		return c
	}
	if c := cmp.Compare(a.id, b.id); c != 0 {
		return c
	}
	if c := cmp.Compare(a.period, b.period); c != 0 {
		return c
	}
	return cmp.Compare(a.start, b.start)
}

// cell is one counter: for a rate bucket the theoretical arrival time in
// Unix nanoseconds (GCRA: the bucket is full when tat <= now), for a
// budget the micro-dollars spent and reserved.
type cell struct {
	mu   sync.Mutex
	dead bool // removed from its shard by the sweeper; look it up again
	v    int64
	// spend is the SpendLog entry a budget counter's settled spend went
	// to last, current while spendGen is the log's gen (SpendLog.addAt);
	// both under the SpendLog's mutex, not mu.
	spend    *pendingSpend
	spendGen uint64
}

// NewEmbedded builds an Embedded admitter, loading the spend of the
// current periods from o.Spend, and starts its background work (spend
// flushing, sweeping). Close stops it.
func NewEmbedded(ctx context.Context, o Options) (*Embedded, error) {
	e := &Embedded{now: o.Now, seed: maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	if e.now == nil {
		e.now = time.Now
	}
	for i := range e.shards {
		e.shards[i].m = map[cellKey]*cell{}
		e.shards[i].hints = map[string]*hint{}
	}
	if o.Spend != nil {
		m, err := o.Spend.LoadSpend(ctx, Since(e.now()))
		if err != nil {
			return nil, fmt.Errorf("limit: load spend: %w", err)
		}
		e.loaded = make(map[BudgetKey]int64, len(m))
		for k, v := range m {
			k.Tag = "" // counters are per scope, whatever the tag
			e.loaded[k] += v
		}
		e.spend = NewSpendLog(o.Spend, o.FlushEvery, o.Log)
	}
	every := o.SweepEvery
	if every <= 0 {
		every = time.Minute
	}
	go e.sweepLoop(every)
	return e, nil
}

// Close stops the background work and writes the spend not yet flushed.
func (e *Embedded) Close(ctx context.Context) error {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
	if e.spend != nil {
		return e.spend.Close(ctx)
	}
	return nil
}

// Flush writes settled spend now (tests, shutdown).
func (e *Embedded) Flush(ctx context.Context) error {
	if e.spend == nil {
		return nil
	}
	return e.spend.Flush(ctx)
}

// op is one counter an admission touches.
type op struct {
	key   cellKey
	limit int64     // units per Window, or budget micros
	end   time.Time // budget period end
	src   int       // index into Rates or Budgets, for the refusal
	c     *cell
}

// cost is what the admission a reserves in o's counter: one request,
// its estimated tokens, or its worst-case cost. It is not kept in the
// op, so that a Memo's plan can share its ops between admissions.
func (o *op) cost(a *Admission) int64 {
	switch o.key.kind {
	case cellRequests:
		return 1
	case cellTokens:
		return a.Tokens
	}
	return int64(a.Cost)
}

func (e *Embedded) lookup(k cellKey, create bool) *cell {
	// The shard is picked by the counter's owner alone: hashing the
	// whole key here would hash it twice per lookup (the shard's map
	// hashes it again), and a key's few counters sharing a shard costs
	// nothing, as each cell has its own lock.
	s := &e.shards[maphash.String(e.seed, k.id)%nShards]
	s.mu.RLock()
	c := s.m[k]
	s.mu.RUnlock()
	if c != nil || !create {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.m[k]; c == nil {
		c = &cell{}
		if k.kind == cellBudget {
			c.v = e.loaded[BudgetKey{Scope: k.scope, ID: k.id, Period: k.period, Start: k.start}]
		}
		s.m[k] = c
	}
	return c
}

// ops lists the counters of a, sorted by key and without duplicates (a
// counter listed twice is reserved once).
func (e *Embedded) ops(a *Admission, now time.Time, buf []op) []op {
	ops := buf[:0]
	for i, r := range a.Rates {
		if r.RPM > 0 {
			ops = append(ops, op{key: cellKey{kind: cellRequests, scope: r.Scope, id: r.ID}, limit: r.RPM, src: i})
		}
		if r.TPM > 0 {
			ops = append(ops, op{key: cellKey{kind: cellTokens, scope: r.Scope, id: r.ID}, limit: r.TPM, src: i})
		}
	}
	for i, b := range a.Budgets {
		start, end := e.cal.span(b.Period, now)
		ops = append(ops, op{key: cellKey{kind: cellBudget, scope: b.Scope, id: b.ID, period: b.Period, start: start},
			limit: int64(b.Limit), end: end, src: i})
	}
	// A request has a handful of cells: insertion sort beats the generic
	// sort's setup at that size, and the order is what makes locking
	// several cells deadlock-free.
	for i := 1; i < len(ops); i++ {
		for j := i; j > 0 && ops[j].key.compare(&ops[j-1].key) < 0; j-- {
			ops[j], ops[j-1] = ops[j-1], ops[j]
		}
	}
	// Duplicates sit side by side now, and only counters of one kind can
	// be equal: the kinds, compared first, spare most key compares.
	w := min(len(ops), 1)
	for i := 1; i < len(ops); i++ {
		if p := &ops[w-1].key; ops[i].key.kind != p.kind || ops[i].key != *p {
			if w != i { // an op is some 130 bytes: not copied onto itself
				ops[w] = ops[i]
			}
			w++
		}
	}
	clear(ops[w:]) // what was dropped keeps no counter alive
	return ops[:w]
}

// Admit implements Admitter.
func (e *Embedded) Admit(ctx context.Context, a Admission) (d Decision, err error) {
	err = e.AdmitInto(ctx, &a, &d)
	return d, err
}

// AdmitInto implements AdmitterInto; it never fails. An admission
// whose Memo has a plan for it locks the plan's cells; any other lists,
// sorts and finds its counters, and leaves a plan in its Memo when there
// is room.
func (e *Embedded) AdmitInto(_ context.Context, a *Admission, d *Decision) error {
	now := e.now()
	p, slot := a.Memo.find(e, a, now)
	if p != nil && lockLive(p.ops) {
		e.admitLocked(a, d, p.ops, now, p)
		return nil
	}
	buf, _ := e.opBufs.Get().(*[maxOps]op)
	if buf == nil {
		buf = new([maxOps]op)
	}
	ops := e.ops(a, now, buf[:])
	defer e.putOps(buf, ops)
	e.lockAll(ops)
	if slot >= 0 {
		// Made while the cells are locked (a shape's first admission of
		// the day, or after a sweep): a reservation of it keeps them.
		p = e.newPlan(a, ops, now)
	}
	e.admitLocked(a, d, ops, now, p)
	a.Memo.keep(slot, p)
	return nil
}

// admitLocked decides the admission a on the locked cells of ops,
// reserves it in them when it passes, writes the outcome to d, and
// unlocks them. p is the Memo plan whose cells (those of ops) and
// settled flags the reservation takes; nil: they are made here.
func (e *Embedded) admitLocked(a *Admission, d *Decision, ops []op, now time.Time, p *plan) {
	ns := now.UnixNano() // once: each call decodes the Time again
	decide(d, a, ops, ns, int64(Window))
	// One pass then reserves in each counter (when admitted), notes
	// what it has left, and unlocks it: all were locked while deciding,
	// so an admission that locks one after it is unlocked here finds
	// this one's reservation, as it would if all were unlocked at once.
	d.Requests, d.Tokens = Quota{}, Quota{}
	for i := range ops {
		o := &ops[i]
		if d.Allowed {
			o.reserve(a, ns)
		}
		noteQuota(d, o, ns, int64(Window))
		o.c.mu.Unlock()
	}
	if !d.Allowed {
		d.Reservation = Reservation{}
		return
	}
	// No ID: Settle finds the counters from the admission itself, or
	// from the cells it keeps.
	var settled *atomic.Bool
	var held *heldCells
	if p != nil {
		// The plan's cells are shared; the flag, from the plan's slabs,
		// is this reservation's.
		settled, held = p.flags.take(), &p.held
	} else {
		h := &heldReservation{held: heldCells{e: e}}
		h.held.hold(ops)
		settled, held = &h.settled, &h.held
	}
	d.Reservation = Reservation{Admission: *a, At: now, settled: settled, held: held}
}

// maxKept is how many of an admission's rates and of its budgets keep
// their counters with the reservation; settling looks up the others.
const maxKept = 4

// heldCells is what an Embedded admission keeps with its reservation:
// the counters it reserved in, so that settling updates them without
// hashing their keys and looking them up again. A counter swept since is
// looked up afresh, as it would have been without them. Admissions of
// one Memo plan share its heldCells; it is never changed once made.
type heldCells struct {
	e       *Embedded      // the admitter whose counters these are
	tokens  [maxKept]*cell // by index into Admission.Rates; nil: none kept
	budgets [maxKept]*cell // by index into Admission.Budgets
}

// heldReservation is a reservation's settled flag, which every copy
// shares, and its heldCells, in one allocation, for an admission that
// has no Memo plan to share cells with.
type heldReservation struct {
	settled atomic.Bool
	held    heldCells
}

// hold keeps the token and budget counters of ops, found and locked.
func (h *heldCells) hold(ops []op) {
	for i := range ops {
		o := &ops[i]
		switch {
		case o.src >= maxKept:
		case o.key.kind == cellTokens:
			h.tokens[o.src] = o.c
		case o.key.kind == cellBudget:
			h.budgets[o.src] = o.c
		}
	}
}

// held returns the counter r's admission kept in cells[i] when r was
// admitted by e; nil when there is none to use.
func (e *Embedded) held(r *Reservation, budget bool, i int) *cell {
	h := r.held
	if h == nil || h.e != e || i >= maxKept {
		return nil
	}
	if budget {
		return h.budgets[i]
	}
	return h.tokens[i]
}

// add sets c to max(c, floor) + delta, locked, unless the sweeper has
// removed c; it reports whether it did. Every settle's correction is of
// this form (a rate bucket refilled from now or given back tokens, a
// budget's reservation replaced by the cost), with noFloor where no
// floor applies; not a function applied to c, which cost each a
// closure and an indirect call.
func (c *cell) add(floor, delta int64) bool {
	c.mu.Lock()
	live := !c.dead
	if live {
		c.v = max(c.v, floor) + delta
	}
	c.mu.Unlock()
	return live
}

// noFloor is cell.add's floor for a plain addition.
const noFloor = math.MinInt64

// putOps gives an op array back, emptied: it must not keep counters or
// their keys alive. ops is what the admission made of it: only its
// length was written (ops clears what it dropped), unless it outgrew
// the array, which then was filled whole.
func (e *Embedded) putOps(buf *[maxOps]op, ops []op) {
	used := maxOps
	if len(ops) > 0 && &ops[0] == &buf[0] {
		used = len(ops)
	}
	clear(buf[:used])
	e.opBufs.Put(buf)
}

// lockAll finds and locks the cells of ops in order, starting over when
// the sweeper removed one between lookup and lock. The cells come from
// the hint of ops' first owner where it has them, and from the shards'
// maps otherwise (then the hint is renewed); after a removed cell, all
// of them from the maps.
func (e *Embedded) lockAll(ops []op) {
	if len(ops) == 0 {
		return
	}
	hinted := true
	var s *shard // the hint's
	for {
		if hinted {
			s = e.fromHint(ops)
		}
		missed := false
		for i := range ops {
			if !hinted || ops[i].c == nil {
				ops[i].c = e.lookup(ops[i].key, true)
				missed = true
			}
		}
		if missed {
			e.keepHint(s, ops)
		}
		dead := -1
		for i := range ops {
			ops[i].c.mu.Lock()
			if ops[i].c.dead {
				dead = i
				break
			}
		}
		if dead < 0 {
			return
		}
		for i := 0; i <= dead; i++ {
			ops[i].c.mu.Unlock()
		}
		hinted = false
	}
}

// fromHint sets the cell of every op the hint of ops[0]'s owner has
// (nil for the others) and returns the hint's shard.
func (e *Embedded) fromHint(ops []op) *shard {
	id := ops[0].key.id
	s := &e.shards[maphash.String(e.seed, id)%nShards]
	s.mu.RLock()
	h := s.hints[id]
	s.mu.RUnlock()
	for i := range ops {
		ops[i].c = nil
		if h == nil {
			continue
		}
		k := &ops[i].key
		// An admission of the same shape lists its counters in the same
		// order: the i-th kept is tried first.
		if i < h.n && h.keys[i].kind == k.kind && h.keys[i] == *k {
			ops[i].c = h.cells[i]
			continue
		}
		for j := range h.n {
			if h.keys[j].kind == k.kind && h.keys[j] == *k {
				ops[i].c = h.cells[j]
				break
			}
		}
	}
	return s
}

// keepHint replaces the hint of ops[0]'s owner, in shard s, by the cells
// of ops, then as many of the old hint's other cells as fit, so that an
// owner whose admissions differ (a per-model rate for each model) keeps
// the counters of each. It is called with no cell locked: the sweeper
// locks a shard and then its cells.
func (e *Embedded) keepHint(s *shard, ops []op) {
	id := ops[0].key.id
	h := &hint{}
	for i := range ops {
		if h.n == maxHint {
			break
		}
		h.keys[h.n], h.cells[h.n] = ops[i].key, ops[i].c
		h.n++
	}
	s.mu.Lock()
	if old := s.hints[id]; old != nil {
	next:
		for j := range old.n {
			if h.n == maxHint {
				break
			}
			for i := range h.n {
				if h.keys[i] == old.keys[j] {
					continue next
				}
			}
			h.keys[h.n], h.cells[h.n] = old.keys[j], old.cells[j]
			h.n++
		}
	}
	s.hints[id] = h
	s.mu.Unlock()
}

// decide checks every op against its locked counter and writes the
// outcome to d: all of d anew but its quotas and reservation, which
// admitLocked writes after (the whole Decision, some 300 bytes, cleared
// here first cost more than the fields written twice). A budget refusal
// wins over a rate one (waiting a minute will not help it); among rate
// refusals, the longest wait wins.
func decide(d *Decision, a *Admission, ops []op, now, window int64) {
	d.Allowed, d.Refused, d.RetryAfter = true, Refusal{}, 0
	d.Budgeted, d.BudgetLeft = false, 0
	for i := range ops {
		o := &ops[i]
		if o.key.kind == cellBudget {
			cost := o.cost(a)
			if o.c.v+cost <= o.limit {
				continue
			}
			if d.Allowed || d.Refused.Kind != KindBudget {
				b := a.Budgets[o.src]
				d.Allowed = false
				d.Refused = Refusal{Scope: b.Scope, ID: b.ID, Name: b.Name, Kind: KindBudget, Period: b.Period, TooLarge: cost > o.limit}
				d.RetryAfter = 0
				if !o.end.IsZero() {
					d.RetryAfter = time.Duration(o.end.UnixNano() - now)
				}
			}
			continue
		}
		inc := increment(o.cost(a), o.limit, window)
		wait := max(o.c.v, now) + inc - now - window
		if wait <= 0 {
			continue
		}
		tooLarge := inc > window
		if !d.Allowed && (d.Refused.Kind == KindBudget || d.Refused.TooLarge ||
			(!tooLarge && time.Duration(wait) <= d.RetryAfter)) {
			continue
		}
		r := a.Rates[o.src]
		kind := KindRequests
		if o.key.kind == cellTokens {
			kind = KindTokens
		}
		d.Allowed = false
		d.Refused = Refusal{Scope: r.Scope, ID: r.ID, Name: r.Name, Kind: kind, TooLarge: tooLarge}
		d.RetryAfter = time.Duration(wait)
		if tooLarge {
			d.RetryAfter = 0
		}
	}
}

// reserve adds what admission a takes to o's locked counter.
func (o *op) reserve(a *Admission, now int64) {
	if o.key.kind == cellBudget {
		o.c.v += o.cost(a)
	} else {
		o.c.v = max(o.c.v, now) + increment(o.cost(a), o.limit, int64(Window))
	}
}

// noteQuota notes in d what o's locked counter has left: for a budget,
// in BudgetLeft; for a bucket, in Requests or Tokens when it binds more
// than the one noted there (less left, or as little left of a lower
// limit; the first of equals stays), so that after all of an
// admission's counters they hold its binding buckets for the headers.
func noteQuota(d *Decision, o *op, now, window int64) {
	if o.key.kind == cellBudget {
		d.noteBudget(o.limit, o.c.v)
		return
	}
	q := Quota{Limit: o.limit, Remaining: remaining(o.limit, o.c.v, now, window), Reset: time.Duration(max(o.c.v-now, 0))}
	p := &d.Requests
	if o.key.kind == cellTokens {
		p = &d.Tokens
	}
	if p.Limit == 0 || q.Remaining < p.Remaining || (q.Remaining == p.Remaining && q.Limit < p.Limit) {
		*p = q
	}
}

// Settle implements Admitter. It corrects the token buckets and budgets by
// the difference between actual and reserved, and records the actual
// cost for persistence.
func (e *Embedded) Settle(ctx context.Context, r Reservation, actual Actual) error {
	return e.SettleInPlace(ctx, &r, actual)
}

// SettleInPlace implements SettlerInPlace: Settle of *r, not copied.
func (e *Embedded) SettleInPlace(_ context.Context, r *Reservation, actual Actual) error {
	if r.Claim() {
		e.settle(r, actual)
	}
	return nil
}

// SettlesWithoutContext implements ContextFreeSettler: Settle works in
// memory and never reads its context.
func (e *Embedded) SettlesWithoutContext() {}

// settle applies a claimed reservation's actual usage.
func (e *Embedded) settle(r *Reservation, actual Actual) {
	if dt := actual.Tokens - r.Admission.Tokens; dt != 0 {
		e.settleTokens(r, dt)
	}
	e.settleBudgets(r, actual.Cost)
}

// settleTokens corrects the token buckets of r's admission by dt, the
// tokens used beyond (or, negative, short of) the estimate reserved.
// The clock is read only for an overrun, the one correction that
// refills a bucket from now: most calls use less than their estimate
// (the output cap), and a clock reading is some 80 instructions.
func (e *Embedded) settleTokens(r *Reservation, dt int64) {
	a := &r.Admission
	var now int64
	if dt > 0 {
		now = e.now().UnixNano()
	}
	for i := range a.Rates {
		rt := &a.Rates[i] // not copied: a Rate is some 60 bytes
		if rt.TPM <= 0 {
			continue
		}
		// An overrun is charged from now (the bucket may have refilled
		// since); tokens not used are given back.
		floor, delta := now, increment(dt, rt.TPM, int64(Window))
		if dt < 0 {
			floor, delta = noFloor, -increment(-dt, rt.TPM, int64(Window))
		}
		if c := e.held(r, false, i); c != nil && c.add(floor, delta) {
			continue
		}
		c := e.lookup(cellKey{kind: cellTokens, scope: rt.Scope, id: rt.ID}, dt > 0)
		if c == nil {
			continue // swept: the bucket is full already
		}
		c.add(floor, delta)
	}
}

// settleBudgets corrects the budgets of r's admission from the cost
// reserved to cost, and records cost for persistence.
func (e *Embedded) settleBudgets(r *Reservation, cost Micros) {
	a := &r.Admission
	dc := int64(cost - a.Cost)
	for i := range a.Budgets {
		b := &a.Budgets[i]
		held := e.held(r, true, i)
		if dc != 0 && (held == nil || !held.add(noFloor, dc)) {
			// Not kept, or swept since: the counter of its period, if
			// there is one still.
			start, _ := e.cal.span(b.Period, r.At)
			if c := e.lookup(cellKey{kind: cellBudget, scope: b.Scope, id: b.ID, period: b.Period, start: start}, false); c != nil {
				c.mu.Lock()
				c.v += dc
				c.mu.Unlock()
			}
		}
		if e.spend != nil {
			e.recordSpend(r, b, held, cost)
		}
	}
}

// recordSpend adds cost to the spend to persist of budget b of r's
// admission, whose counter is held (nil when not kept). The entry a kept
// counter's spend went to last takes it without the budget's key being
// made: only its tag can differ (see SpendLog.addKnown).
func (e *Embedded) recordSpend(r *Reservation, b *Budget, held *cell, cost Micros) {
	if held != nil && e.spend.addKnown(held, r.Admission.Tag, int64(cost)) {
		return
	}
	start, _ := e.cal.span(b.Period, r.At)
	k := BudgetKey{Tag: r.Admission.Tag, Scope: b.Scope, ID: b.ID, Period: b.Period, Start: start}
	if held != nil {
		e.spend.addAt(held, k, int64(cost))
	} else {
		e.spend.Add(k, int64(cost))
	}
}

// Spent returns the spend counted (settled and reserved) on a budget in
// the period containing t. It makes no counter: the admin API reads the
// budgets of whole pages of records, most of them idle, and a counter not
// yet made holds what was persisted before start.
func (e *Embedded) Spent(scope Scope, id string, p Period, t time.Time) Micros {
	start, _ := p.Span(t)
	k := cellKey{kind: cellBudget, scope: scope, id: id, period: p, start: start}
	c := e.lookup(k, false)
	if c == nil {
		return Micros(e.loaded[BudgetKey{Scope: scope, ID: id, Period: p, Start: start}])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Micros(c.v)
}

func (e *Embedded) sweepLoop(every time.Duration) {
	defer close(e.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.sweep(e.now())
		}
	}
}

// sweep drops rate buckets that are full (an absent bucket is a full one)
// and budget counters of periods that have ended. Settles still due on an
// ended period then only reach the SpendStore.
func (e *Embedded) sweep(now time.Time) {
	ns := now.UnixNano()
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		clear(s.hints) // they hold the counters dropped here
		for k, c := range s.m {
			c.mu.Lock()
			var drop bool
			if k.kind == cellBudget {
				start, _ := k.period.Span(now)
				drop = k.start != start
			} else {
				drop = c.v <= ns
			}
			if drop {
				c.dead = true
				delete(s.m, k)
			}
			c.mu.Unlock()
		}
		s.mu.Unlock()
	}
}

var (
	_ ContextFreeSettler = (*Embedded)(nil)
	_ AdmitterInto       = (*Embedded)(nil)
	_ SettlerInPlace     = (*Embedded)(nil)
)
