package limit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// What a Fallback owes its Primary after an outage, and how it pays.

// maxHeld bounds the settlements of Primary's reservations a Fallback
// holds back while Primary is unreachable; past it they are handed to
// Primary at once, whose own queue retries them for a while.
const maxHeld = 4096

// retryTimeout bounds one background attempt to pay what is owed.
const retryTimeout = 5 * time.Second

type heldSettle struct {
	r      Reservation
	actual Actual
}

// owed is what a Fallback owes Primary: the spend its local limiter
// settled (carry), and the settlements of Primary's own reservations
// that came while Primary could not be reached (held). The zero value
// owes nothing.
type owed struct {
	mu       sync.Mutex
	carry    map[BudgetKey]int64
	held     []heldSettle
	retrying bool          // the background retry runs
	closed   bool          // Close was called: no more background retries
	stop     chan struct{} // closed by Close; made with the first retry
	wg       sync.WaitGroup

	carrying atomic.Bool // carry is not empty: read on every admission without the mutex
	holding  atomic.Bool // held is not empty: likewise
	flushMu  sync.Mutex  // one carry at a time: two would add the same spend twice
}

// cooldown is Cooldown with its default.
func (f *Fallback) cooldown() time.Duration {
	if f.Cooldown <= 0 {
		return time.Second
	}
	return f.Cooldown
}

// degrade starts an outage after err: a Cooldown of local admissions or
// refusals, which a probe may end sooner.
func (f *Fallback) degrade(err error) {
	now, c := f.now(), f.cooldown()
	f.probeAt.Store(now.Add(firstProbe(c)).UnixNano())
	f.downUntil.Store(now.Add(c).UnixNano())
	if f.OnDegraded != nil {
		f.OnDegraded(err)
	}
}

// carry owes Primary cost, settled locally on r's budgets.
func (f *Fallback) carry(r Reservation, cost Micros) {
	o := &f.owed
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.carry == nil {
		o.carry = map[BudgetKey]int64{}
	}
	for _, b := range r.Admission.Budgets {
		start, _ := b.Period.Span(r.At)
		o.carry[BudgetKey{Tag: r.Admission.Tag, Scope: b.Scope, ID: b.ID, Period: b.Period, Start: start}] += int64(cost)
	}
	o.carrying.Store(len(o.carry) > 0)
	f.retryLocked()
}

// hold keeps a settlement of Primary's reservation until Primary answers
// again; false when there is no room (or the Fallback is closing).
func (f *Fallback) hold(r Reservation, actual Actual) bool {
	o := &f.owed
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || len(o.held) >= maxHeld {
		return false
	}
	o.held = append(o.held, heldSettle{r, actual})
	o.holding.Store(true)
	f.retryLocked()
	return true
}

// retryLocked starts the background retry unless it runs: something is
// owed now, and a replica that serves no request after the outage must
// still pay it.
func (f *Fallback) retryLocked() {
	o := &f.owed
	if o.retrying || o.closed {
		return
	}
	if o.stop == nil {
		o.stop = make(chan struct{})
	}
	o.retrying = true
	o.wg.Add(1)
	go f.retry(o.stop)
}

// retry tries, every Cooldown, to carry the spend owed to Primary (which
// also tells that Primary answers again) and then to hand it the held
// settlements, until nothing is owed or Close.
func (f *Fallback) retry(stop <-chan struct{}) {
	o := &f.owed
	defer o.wg.Done()
	t := time.NewTicker(f.cooldown())
	defer t.Stop()
	for {
		select {
		case <-stop:
			o.mu.Lock()
			o.retrying = false
			o.mu.Unlock()
			return
		case <-t.C:
		}
		if !f.Degraded() {
			ctx, cancel := context.WithTimeout(context.Background(), retryTimeout)
			carried, err := f.flushCarry(ctx)
			switch {
			case err != nil && errors.Is(err, ErrUnavailable):
				f.degrade(err)
			case err == nil && carried:
				f.release(ctx)
			}
			cancel()
		}
		o.mu.Lock()
		if !o.carrying.Load() && !o.holding.Load() {
			o.retrying = false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
	}
}

// flushCarry adds the spend carried from an outage to Primary's counters,
// and reports whether it added any (Primary answered). It returns at
// once when nothing is carried, or when another flush is under way (its
// caller then admits against counters that are short of the spend being
// added, for the moment that takes). What could not be added stays
// carried; a delta whose reply was lost is added again later, counting
// that spend twice rather than not at all.
func (f *Fallback) flushCarry(ctx context.Context) (bool, error) {
	o := &f.owed
	adder, ok := f.Primary.(SpendAdder)
	if !ok || !o.carrying.Load() || !o.flushMu.TryLock() {
		return false, nil
	}
	defer o.flushMu.Unlock()
	o.mu.Lock()
	todo := o.carry
	o.carry = nil
	o.carrying.Store(false)
	o.mu.Unlock()
	var err error
	added := false
	for k, v := range todo {
		if err == nil {
			if err = adder.AddSpend(ctx, k, v); err == nil {
				added = true
				continue
			}
		}
		o.mu.Lock() // kept for the next flush
		if o.carry == nil {
			o.carry = map[BudgetKey]int64{}
		}
		o.carry[k] += v
		o.carrying.Store(true)
		o.mu.Unlock()
	}
	if err != nil {
		return added, fmt.Errorf("carry the spend settled while degraded: %w", err)
	}
	return added, nil
}

// release hands the held settlements to Primary, once it answered again.
// Each is claimed only now, by Primary's Settle.
func (f *Fallback) release(ctx context.Context) {
	o := &f.owed
	if !o.holding.Load() {
		return
	}
	o.mu.Lock()
	held := o.held
	o.held = nil
	o.holding.Store(false)
	o.mu.Unlock()
	for _, h := range held {
		_ = f.Primary.Settle(ctx, h.r, h.actual) // a settlement it drops, it logs
	}
}

// Owed is the spend settled locally and not yet added to Primary's
// counters, and how many settlements of Primary's reservations wait for
// it; for tests and the log.
func (f *Fallback) Owed() (map[BudgetKey]int64, int) {
	o := &f.owed
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[BudgetKey]int64, len(o.carry))
	for k, v := range o.carry {
		out[k] = v
	}
	return out, len(o.held)
}

// Close stops the background retry and pays what is still owed if
// Primary answers (the held settlements are handed over either way; the
// durable spend record has the carried spend regardless). It closes
// neither Primary nor Local, and must come before Primary's Close.
func (f *Fallback) Close(ctx context.Context) error {
	o := &f.owed
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		if o.stop != nil {
			close(o.stop)
		}
	}
	o.mu.Unlock()
	o.wg.Wait()
	_, err := f.flushCarry(ctx)
	f.release(ctx)
	return err
}
