package limit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Leases: admitting against capacity taken from the shared counters in
// batches, so that at steady state no request waits on Redis.
//
// A Leaser sits in front of a LeaseStore (the Redis limiter). For every
// counter a request touches (a request bucket, a token bucket, a budget
// of one period) it holds a lease: a grant of units taken from the shared
// counter, at most Size = Fraction × the limit. An admission is checked
// and reserved against the leases of its counters under one mutex (the
// counters of a request share its tag), with no round trip. When a lease
// falls below half its size, every lease of the tag that is not full is
// topped up by one background exchange with the store; only a lease
// that cannot cover a request (the first request, a request larger than
// what is left) makes the request wait for an exchange.
//
// # Exactness
//
// The shared counter counts what the replicas took, minus what they gave
// back. A lease's holder keeps avail (what it may still admit); an
// admission takes its cost off avail, a settle puts back the difference
// between reserved and actual (which may leave avail below zero: a debt).
// What exceeds Size goes back at the next exchange, and so does all of
// avail, debt included, once the lease has been idle for Idle, or at
// Close. So once every request has settled and every lease has been given
// back, a budget counter holds exactly the sum of the actual costs, and
// the durable record (RecordSpend, at each settle) the same sum.
//
// # The overshoot bound
//
// Let L be a limit's lease size, ⌊Fraction × limit⌋ (at least 1), and R
// the number of replicas. After every admission and settle a replica holds
// at most L units of that limit unused (the excess is owed back), so at
// any moment all replicas together hold at most R × L.
//
//   - Rate limits (requests and tokens per minute): in any interval,
//     the requests admitted are at most what the store's own limiter
//     would admit in that interval plus R × L: units taken before the
//     interval and spent in it, while the shared bucket refilled as if
//     they had been spent when taken.
//   - Budgets: never above the limit through leases, since a lease is
//     taken under the limit's check like a reservation; the cost is the
//     other side: a request may be refused while other replicas hold up
//     to (R−1) × L unused, until they give it back (Idle). A grant is at
//     most half of what the counter has left, so leases shrink as a
//     budget nears its end and every replica keeps a share of the rest.
//   - As without leases, a settle whose actual cost exceeds the estimate
//     can take a budget past its limit by the difference.
//
// A replica that stops without Close leaves its leases counted: at most
// L per counter, on the safe side (the rate buckets refill within the
// minute; a budget counts up to L too much until its period ends or the
// counter is rebuilt from the durable record).

// LeaseStore is the shared backend a Leaser takes capacity from (the
// Redis limiter). It is an Admitter too, for the requests leases cannot
// serve: refusals, which it words and times.
type LeaseStore interface {
	Admitter
	// Lease exchanges units with the shared counters of one tag in one
	// atomic call: each op first hands Back (negative: charges more),
	// then takes what it can of Want — at least Need for every op that
	// has one, or nothing for any. id names the exchange: a second call
	// with the same id applies nothing (a retry after a lost reply).
	// Errors reaching the store wrap ErrUnavailable.
	Lease(ctx context.Context, tag, id string, ops []LeaseOp) (LeaseReply, error)
	// RecordSpend adds spend settled against a lease to the durable
	// record of spend.
	RecordSpend(k BudgetKey, micros int64)
}

// LeaseCounter names one shared counter: a rate bucket (Kind requests or
// tokens) of a scope, or a budget of a scope in one period.
type LeaseCounter struct {
	Kind   Kind
	Scope  Scope
	ID     string
	Period Period    // budgets
	Start  string    // budgets: the period's first day, "" for Total
	End    time.Time // budgets: when the period ends, zero for Total
}

// LeaseOp is what one exchange does to one counter.
type LeaseOp struct {
	Counter LeaseCounter
	Limit   int64 // per Window for rates; micro-dollars for budgets
	Back    int64 // units handed back first; negative charges more
	Want    int64 // units asked for
	Need    int64 // units without which nothing is taken
}

// LeaseReply is the outcome of an exchange.
type LeaseReply struct {
	// Refused is 1 + the index of an op whose Need could not be met, or 0.
	Refused int
	Granted []int64 // per op: units taken
	Free    []int64 // per op: units the shared counter has left after the call
}

// Lease defaults.
const (
	DefaultLeaseFraction = 0.05
	DefaultLeaseIdle     = 10 * time.Second
)

// LeaseOptions configure a Leaser. The zero value is usable.
type LeaseOptions struct {
	// Fraction is the share of a limit one lease holds
	// (DefaultLeaseFraction when 0).
	Fraction float64
	// Idle is how long a lease stays unused before it is given back
	// (DefaultLeaseIdle when 0).
	Idle time.Duration
	// Every is how often idle leases are looked for and what is owed is
	// handed back (Idle/4 when 0; negative: never, for tests that call
	// Sweep).
	Every time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	Log *slog.Logger
	// Go starts a background refill; `go f()` when nil. Tests run it
	// inline, so when a refill happens does not depend on the scheduler.
	Go func(f func())
}

// Leaser is an Admitter that admits against leases taken from a
// LeaseStore; see the comment at the top of this file. It is safe for
// concurrent use.
type Leaser struct {
	store    LeaseStore
	fraction float64
	idle     time.Duration
	now      func() time.Time
	log      *slog.Logger
	spawn    func(func())

	tags  sync.Map // tag → *tagLeases
	ids   atomic.Uint64
	ready atomic.Int64 // admissions served from leases alone
	waits atomic.Int64 // admissions that waited for an exchange

	mu     sync.Mutex // guards closed and the WaitGroup's Add
	closed bool
	wg     sync.WaitGroup
	stop   chan struct{}
}

// leaseKey names one lease within its tag.
type leaseKey struct {
	kind   Kind
	scope  Scope
	id     string
	period Period
	start  string
}

// lease is one replica's grant on one shared counter. Its fields are
// guarded by its tag's mutex.
type lease struct {
	key   leaseKey
	end   time.Time
	limit int64
	size  int64 // 0 once retired: everything that comes back is owed back
	avail int64 // units this replica may still admit; below zero, a debt
	back  int64 // units owed back at the next exchange (negative: owed more)
	free  int64 // units the shared counter had left at the last exchange
	out   int   // admitted reservations not yet settled
	last  int64 // Unix nanoseconds of the last admission
	// refilling says a background top-up of the tag is under way.
	refilling bool
	listed    bool // retired and on its tag's list
}

// tagLeases is the leases of one tag: a request's counters all share its
// tag, so one mutex covers one admission.
type tagLeases struct {
	tag  string
	mu   sync.Mutex
	dead bool // dropped from the Leaser's map by a sweep: look it up again
	m    map[leaseKey]*lease
	// retired leases (idle, or their limit changed) still owed something
	// or still holding reservations; dropped once settled and paid.
	retired []*lease
	// pending are exchanges whose outcome is unknown (an error): their
	// hand-backs are sent again under the same id, which the store
	// applies at most once.
	pending []pendingExchange
}

type pendingExchange struct {
	id  string
	ops []LeaseOp
}

// leaseHold is what an admitted reservation drew from.
type leaseHold struct {
	tl     *tagLeases
	leases []*lease
}

// NewLeaser starts a Leaser in front of store; Close stops it and gives
// back what it holds.
func NewLeaser(store LeaseStore, o LeaseOptions) *Leaser {
	l := &Leaser{store: store, fraction: o.Fraction, idle: o.Idle, now: o.Now, log: o.Log, spawn: o.Go, stop: make(chan struct{})}
	if l.fraction <= 0 {
		l.fraction = DefaultLeaseFraction
	}
	if l.idle <= 0 {
		l.idle = DefaultLeaseIdle
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	every := o.Every
	if every == 0 {
		every = max(l.idle/4, 100*time.Millisecond)
	}
	if every > 0 {
		l.wg.Add(1)
		go l.sweeper(every)
	}
	return l
}

// leaseNeed is one counter an admission touches.
type leaseNeed struct {
	key   leaseKey
	end   time.Time
	limit int64
	cost  int64
}

// needs lists the counters of a without duplicates (a counter listed
// twice is reserved once); false when one alone is larger than its limit,
// which the store refuses with its own words.
func needs(a *Admission, now time.Time, buf []leaseNeed) ([]leaseNeed, bool) {
	out := buf[:0]
	add := func(n leaseNeed) {
		for _, have := range out {
			if have.key == n.key {
				return
			}
		}
		out = append(out, n)
	}
	for _, r := range a.Rates {
		if r.RPM > 0 {
			add(leaseNeed{key: leaseKey{kind: KindRequests, scope: r.Scope, id: r.ID}, limit: r.RPM, cost: 1})
		}
		if r.TPM > 0 {
			if a.Tokens > r.TPM {
				return nil, false
			}
			add(leaseNeed{key: leaseKey{kind: KindTokens, scope: r.Scope, id: r.ID}, limit: r.TPM, cost: a.Tokens})
		}
	}
	for _, b := range a.Budgets {
		if a.Cost > b.Limit {
			return nil, false
		}
		start, end := b.Period.Span(now)
		add(leaseNeed{key: leaseKey{kind: KindBudget, scope: b.Scope, id: b.ID, period: b.Period, start: start}, end: end,
			limit: int64(b.Limit), cost: int64(a.Cost)})
	}
	return out, true
}

func (l *Leaser) tagOf(tag string) *tagLeases {
	if v, ok := l.tags.Load(tag); ok {
		return v.(*tagLeases)
	}
	v, _ := l.tags.LoadOrStore(tag, &tagLeases{tag: tag, m: map[leaseKey]*lease{}})
	return v.(*tagLeases)
}

// size is the lease size of a limit.
func (l *Leaser) size(limit int64) int64 {
	return max(int64(l.fraction*float64(limit)), 1)
}

// findLocked returns the lease of n, making it (empty) when there is none
// and retiring one whose limit changed (a reload, an admin edit).
func (l *Leaser) findLocked(tl *tagLeases, n *leaseNeed) *lease {
	ls := tl.m[n.key]
	if ls != nil && ls.limit == n.limit {
		return ls
	}
	if ls != nil {
		tl.retireLocked(ls)
	}
	ls = &lease{key: n.key, end: n.end, limit: n.limit, size: l.size(n.limit)}
	tl.m[n.key] = ls
	return ls
}

// retireLocked takes ls out of service: what it holds is owed back, and
// so is whatever its reservations give back when they settle.
func (tl *tagLeases) retireLocked(ls *lease) {
	delete(tl.m, ls.key)
	ls.size = 0
	ls.trim()
	tl.listLocked(ls)
}

// listLocked puts a retired lease on the list of those owed something.
func (tl *tagLeases) listLocked(ls *lease) {
	if !ls.listed {
		ls.listed = true
		tl.retired = append(tl.retired, ls)
	}
}

// trim moves what ls holds beyond its size into what it owes back: the
// bound on what a replica holds.
func (ls *lease) trim() {
	if ls.avail > ls.size {
		ls.back += ls.avail - ls.size
		ls.avail = ls.size
	}
	if ls.size == 0 && ls.avail < 0 { // a retired lease's debt is owed too
		ls.back += ls.avail
		ls.avail = 0
	}
}

// Admit implements Admitter. A request the leases cover is admitted with
// no round trip; one they cannot, after one exchange, is decided by the
// store.
func (l *Leaser) Admit(ctx context.Context, a Admission) (Decision, error) {
	now := l.now()
	var buf [8]leaseNeed
	ns, ok := needs(&a, now, buf[:])
	if !ok || len(ns) == 0 {
		return l.store.Admit(ctx, a)
	}
	tl := l.tagOf(a.Tag)
	var lsBuf [8]*lease
	for try := 0; ; try++ {
		tl.mu.Lock()
		for tl.dead {
			tl.mu.Unlock()
			tl = l.tagOf(a.Tag)
			tl.mu.Lock()
		}
		ls := lsBuf[:0]
		short := false
		for i := range ns {
			x := l.findLocked(tl, &ns[i])
			ls = append(ls, x)
			if x.avail < ns[i].cost {
				short = true
			}
		}
		if !short {
			d, refill := l.admitLocked(tl, &a, ns, ls, now)
			tl.mu.Unlock()
			if try == 0 {
				l.ready.Add(1)
			} else {
				l.waits.Add(1)
			}
			if refill {
				l.refill(tl)
			}
			return d, nil
		}
		if try > 0 {
			// Still short after an exchange: others took what the
			// exchange brought. The store decides.
			tl.mu.Unlock()
			break
		}
		var e exchangeOps
		l.opsLocked(tl, &e)
		for i := range ns {
			x := ls[i]
			if x.avail >= ns[i].cost {
				continue
			}
			need := ns[i].cost - x.avail
			e.take(x, need+x.size, need)
		}
		tl.mu.Unlock()
		rep, err := l.exchange(ctx, tl, &e)
		if err != nil {
			return Decision{}, err
		}
		if rep.Refused != 0 {
			break
		}
	}
	l.waits.Add(1)
	return l.store.Admit(ctx, a)
}

// admitLocked reserves a's costs in its leases, which all cover them, and
// reports whether the tag wants topping up.
func (l *Leaser) admitLocked(tl *tagLeases, a *Admission, ns []leaseNeed, ls []*lease, now time.Time) (Decision, bool) {
	d := Decision{Allowed: true}
	refill := false
	for i, x := range ls {
		x.avail -= ns[i].cost
		x.out++
		x.last = now.UnixNano()
		x.trim()
		if x.avail < x.size/2+x.size%2 && !x.refilling {
			refill = true
		}
		left := min(max(x.free+x.avail, 0), x.limit)
		switch x.key.kind {
		case KindBudget:
			d.noteBudget(x.limit, x.limit-left)
		default:
			q := Quota{Limit: x.limit, Remaining: left, Reset: time.Duration(increment(x.limit-left, x.limit, int64(Window)))}
			p := &d.Requests
			if x.key.kind == KindTokens {
				p = &d.Tokens
			}
			if p.Limit == 0 || q.Remaining < p.Remaining || (q.Remaining == p.Remaining && q.Limit < p.Limit) {
				*p = q
			}
		}
	}
	d.Reservation = NewReservation("", *a, now)
	d.Reservation.lease = &leaseHold{tl: tl, leases: append([]*lease(nil), ls...)}
	if refill {
		for _, x := range tl.m {
			if x.avail < x.size {
				x.refilling = true
			}
		}
	}
	return d, refill
}

func (ls *lease) counter() LeaseCounter {
	return LeaseCounter{Kind: ls.key.kind, Scope: ls.key.scope, ID: ls.key.id, Period: ls.key.period, Start: ls.key.start, End: ls.end}
}

// exchangeOps is one exchange being built: one op per counter, and the
// lease each op's grant goes to.
type exchangeOps struct {
	ops  []LeaseOp
	held []*lease
}

// at is the index of x's counter's op, adding one.
func (e *exchangeOps) at(x *lease) int {
	for i, h := range e.held {
		if h.key == x.key {
			return i
		}
	}
	e.ops = append(e.ops, LeaseOp{Counter: x.counter(), Limit: x.limit})
	e.held = append(e.held, x)
	return len(e.ops) - 1
}

// giveBack adds what x owes back to its counter's op. A rate lease
// retired because its limit changed counts units of its old limit: they
// are converted to the op's, keeping the time they stand for.
func (e *exchangeOps) giveBack(x *lease) {
	if x.back == 0 {
		return
	}
	i := e.at(x)
	b := x.back
	if op := &e.ops[i]; op.Limit != x.limit && x.key.kind != KindBudget {
		b = b * op.Limit / x.limit
	}
	e.ops[i].Back += b
	x.back = 0
}

// take asks for want units (need at the least) for x.
func (e *exchangeOps) take(x *lease, want, need int64) {
	i := e.at(x)
	op := &e.ops[i]
	if e.held[i] != x { // a retired lease of the counter came first
		if x.key.kind != KindBudget {
			op.Back = op.Back * x.limit / op.Limit
		}
		op.Limit, op.Counter, e.held[i] = x.limit, x.counter(), x
	}
	op.Want += want
	op.Need += need
}

// opsLocked adds to e what the tag's leases owe back (taking it off
// them: a failed exchange keeps it pending) and drops retired leases
// that are done.
func (l *Leaser) opsLocked(tl *tagLeases, e *exchangeOps) {
	for _, x := range tl.m {
		e.giveBack(x)
	}
	kept := tl.retired[:0]
	for _, x := range tl.retired {
		e.giveBack(x)
		if x.out > 0 {
			kept = append(kept, x)
		} else {
			x.listed = false
		}
	}
	clear(tl.retired[len(kept):])
	tl.retired = kept
}

// exchange runs e in one store call and credits the grants. On an error
// the hand-backs stay pending.
func (l *Leaser) exchange(ctx context.Context, tl *tagLeases, e *exchangeOps) (LeaseReply, error) {
	if len(e.ops) == 0 {
		return LeaseReply{}, nil
	}
	id := l.newID()
	rep, err := l.store.Lease(ctx, tl.tag, id, e.ops)
	if err == nil && (len(rep.Granted) != len(e.ops) || len(rep.Free) != len(e.ops)) {
		err = fmt.Errorf("limit: lease: %w: reply for %d counters, want %d", ErrUnavailable, len(rep.Granted), len(e.ops))
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if err != nil {
		var backs []LeaseOp
		for _, op := range e.ops {
			if op.Back != 0 {
				backs = append(backs, LeaseOp{Counter: op.Counter, Limit: op.Limit, Back: op.Back})
			}
		}
		if len(backs) > 0 {
			tl.pending = append(tl.pending, pendingExchange{id: id, ops: backs})
		}
		return rep, err
	}
	for i, x := range e.held {
		x.avail += rep.Granted[i]
		x.free = rep.Free[i]
		if x.size == 0 && rep.Granted[i] != 0 {
			// Retired while the exchange ran: the grant is owed back.
			x.trim()
			tl.listLocked(x)
		}
	}
	return rep, nil
}

// refill tops up the tag's leases in the background.
func (l *Leaser) refill(tl *tagLeases) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.unmark(tl)
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	run := func() {
		defer l.wg.Done()
		defer l.unmark(tl)
		tl.mu.Lock()
		var e exchangeOps
		l.opsLocked(tl, &e)
		for _, x := range tl.m {
			if x.refilling && x.avail < x.size {
				e.take(x, x.size-x.avail, 0)
			}
		}
		tl.mu.Unlock()
		// The refill serves the requests to come, not the one that
		// started it: its own deadline, not that request's.
		ctx, cancel := context.WithTimeout(context.Background(), refillTimeout)
		defer cancel()
		if _, err := l.exchange(ctx, tl, &e); err != nil {
			l.log.Warn("limit: topping up leases failed; admitting from what is left", "tag", tl.tag, "err", err)
		}
	}
	if l.spawn != nil {
		l.spawn(run)
	} else {
		go run()
	}
}

// refillTimeout bounds one background exchange.
const refillTimeout = 5 * time.Second

func (l *Leaser) unmark(tl *tagLeases) {
	tl.mu.Lock()
	for _, x := range tl.m {
		x.refilling = false
	}
	tl.mu.Unlock()
}

func (l *Leaser) newID() string { return "x" + strconv.FormatUint(l.ids.Add(1), 36) }

// Settle implements Admitter. A reservation made from leases settles
// locally: the difference between reserved and actual goes back to (or
// comes off) the leases, and the actual cost to the durable record.
func (l *Leaser) Settle(ctx context.Context, r Reservation, actual Actual) error {
	h := r.lease
	if h == nil {
		return l.store.Settle(ctx, r, actual)
	}
	if !r.Claim() {
		return nil
	}
	a := &r.Admission
	h.tl.mu.Lock()
	for _, x := range h.leases {
		switch x.key.kind {
		case KindTokens:
			x.avail += a.Tokens - actual.Tokens
		case KindBudget:
			x.avail += int64(a.Cost - actual.Cost)
		}
		x.out--
		x.trim()
	}
	h.tl.mu.Unlock()
	for _, b := range a.Budgets {
		start, _ := b.Period.Span(r.At)
		l.store.RecordSpend(BudgetKey{Tag: a.Tag, Scope: b.Scope, ID: b.ID, Period: b.Period, Start: start}, int64(actual.Cost))
	}
	return nil
}

func (l *Leaser) sweeper(every time.Duration) {
	defer l.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), refillTimeout)
		if err := l.Sweep(ctx); err != nil {
			l.log.Warn("limit: handing back leases failed; will retry", "err", err)
		}
		cancel()
	}
}

// Sweep gives back the leases unused for Idle and whatever else is owed
// (the excess of settles, exchanges that failed), one exchange per tag.
func (l *Leaser) Sweep(ctx context.Context) error {
	return l.sweep(ctx, l.now(), false)
}

// sweep hands back what is owed; with all, every lease, idle or not.
func (l *Leaser) sweep(ctx context.Context, now time.Time, all bool) error {
	var errs []error
	l.tags.Range(func(_, v any) bool {
		tl := v.(*tagLeases)
		tl.mu.Lock()
		for _, x := range tl.m {
			if all || now.UnixNano()-x.last >= int64(l.idle) {
				tl.retireLocked(x)
			}
		}
		var e exchangeOps
		l.opsLocked(tl, &e)
		pending := tl.pending
		tl.pending = nil
		if len(e.ops) == 0 && len(pending) == 0 && len(tl.m) == 0 && len(tl.retired) == 0 {
			// Nothing held, owed or out: forget the tag (a project that
			// went quiet), so the map does not grow with every tag ever seen.
			tl.dead = true
			l.tags.Delete(tl.tag)
		}
		tl.mu.Unlock()
		for i, p := range pending {
			if _, err := l.store.Lease(ctx, tl.tag, p.id, p.ops); err != nil {
				tl.mu.Lock()
				tl.pending = append(tl.pending, pending[i:]...)
				tl.mu.Unlock()
				errs = append(errs, err)
				break
			}
		}
		if _, err := l.exchange(ctx, tl, &e); err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return errors.Join(errs...)
}

// Release gives back every lease now (a config reload: the limits may
// have changed); the next admission takes new ones.
func (l *Leaser) Release(ctx context.Context) error {
	return l.sweep(ctx, l.now(), true)
}

// Held is what this replica holds unused and owes back on every counter
// of a tag, for tests and the log: units by counter.
func (l *Leaser) Held(tag string) (avail, owed map[LeaseCounter]int64) {
	avail, owed = map[LeaseCounter]int64{}, map[LeaseCounter]int64{}
	v, ok := l.tags.Load(tag)
	if !ok {
		return avail, owed
	}
	tl := v.(*tagLeases)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, x := range tl.m {
		avail[x.counter()] += x.avail
		owed[x.counter()] += x.back
	}
	for _, x := range tl.retired {
		owed[x.counter()] += x.back
	}
	for _, p := range tl.pending {
		for _, op := range p.ops {
			owed[op.Counter] += op.Back
		}
	}
	return avail, owed
}

// LeaseStats counts admissions: served from leases alone, and those that
// waited for an exchange with the store (or were decided by it).
type LeaseStats struct{ Ready, Waited int64 }

// Stats reports the admissions so far.
func (l *Leaser) Stats() LeaseStats { return LeaseStats{Ready: l.ready.Load(), Waited: l.waits.Load()} }

// AddSpend implements SpendAdder when the store does, so a Fallback in
// front of the Leaser still carries an outage's spend to the store.
func (l *Leaser) AddSpend(ctx context.Context, k BudgetKey, delta int64) error {
	if sa, ok := l.store.(SpendAdder); ok {
		return sa.AddSpend(ctx, k, delta)
	}
	return nil
}

// Close stops the background work and gives back every lease. Call it
// once requests have settled (what reservations still out return later
// is not handed back); before the store's Close.
func (l *Leaser) Close(ctx context.Context) error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.stop)
	}
	l.mu.Unlock()
	l.wg.Wait()
	return l.sweep(ctx, l.now(), true)
}

var (
	_ Admitter   = (*Leaser)(nil)
	_ SpendAdder = (*Leaser)(nil)
)
