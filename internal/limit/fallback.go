package limit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// FailurePolicy is what a Fallback does when its primary (Redis) is
// unavailable.
type FailurePolicy string

const (
	// FailClosed refuses: Admit returns the ErrUnavailable error, which
	// the server answers with 503.
	FailClosed FailurePolicy = "closed"
	// FailOpen admits through a local limiter that enforces this
	// replica's share of every limit (limit / Replicas).
	FailOpen FailurePolicy = "open"
)

// SpendAdder is a Primary that can take spend settled elsewhere into its
// budget counters: what a Fallback's local limiter settled while the
// Primary could not be reached. The Redis limiter implements it.
type SpendAdder interface {
	// AddSpend adds delta micro-dollars to the counter of k. An error
	// wrapping ErrUnavailable means it could not be reached.
	AddSpend(ctx context.Context, k BudgetKey, delta int64) error
}

// Fallback is an Admitter that uses Primary and, when Primary returns
// ErrUnavailable, applies Policy. After a failure it is degraded, so an
// outage does not add Primary's timeout to every request, but not blind:
// while degraded, one admission at a time still asks Primary (a probe),
// and the first probe Primary answers ends the outage. Under FailClosed,
// where degraded means refusing, every admission may probe while no
// other does (the rest are refused at once): one lost reply under load
// costs one refusal rather than a Cooldown of them, and nothing is
// admitted without Primary's word. Under FailOpen the others are served
// at once by the local limiter, and so is a probe Primary does not
// answer; since that probe has waited for Primary's timeout, probes are
// spaced: the first an eighth of Cooldown after the failure (after a
// blink of Redis, the local shares serve that long rather than a whole
// Cooldown), the next a Cooldown after each one that failed, so a dead
// Primary holds at most one request per Cooldown. Either way a dead Primary sees
// at most one call at a time, and a probe that fails is not reported
// again (OnDegraded is called once per outage while requests keep
// coming).
//
// While degraded, budgets too are enforced per replica share, counted by
// the local limiter since the process started: a replica cannot see what
// the others spent, so the outages of one period can let up to one whole
// budget (the sum of the shares) through on top of what Primary counted.
//
// What the local limiter settles is carried into Primary's counters once
// Primary answers again (when it is a SpendAdder), and settlements of
// Primary's own reservations made while it was unreachable are held back
// and handed to it then: by the first admission Primary answers (the
// probe that ends the outage, or the first after it ran out), by a
// background retry every Cooldown meanwhile, and by Close. From then on
// Primary's counters hold every request's cost again, reservations
// included, and its limits are exact. Rate windows are not carried: the
// requests admitted locally are forgiven by Primary's rate limits, at
// most one window's worth.
type Fallback struct {
	Primary Admitter
	Local   *Embedded // used only under FailOpen; required then
	Policy  FailurePolicy
	// Replicas is how many gateway replicas share the limits; each
	// enforces 1/Replicas of every limit while degraded (at least 1).
	Replicas int
	// Cooldown is how long to stay degraded after a failure (1s when 0)
	// if no probe ends it sooner; under FailOpen also how far apart the
	// probes of a dead Primary are.
	Cooldown time.Duration
	// OnDegraded, when set, is called when an outage begins.
	OnDegraded func(error)
	// Now is the clock that times the outage and its probes; time.Now
	// when nil (tests move their own, to make a probe due).
	Now func() time.Time

	downUntil atomic.Int64 // Unix nanoseconds
	probeAt   atomic.Int64 // Unix nanoseconds: no FailOpen probe before
	probing   atomic.Bool  // an admission asks Primary while degraded

	owed owed // what Primary is owed from an outage (carry.go)
}

// Degraded reports whether an outage is under way: the last Primary
// failure is within Cooldown (under FailOpen, a failed probe's outage
// lasts until past the next probe).
func (f *Fallback) Degraded() bool { return f.now().UnixNano() < f.downUntil.Load() }

func (f *Fallback) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Admit implements Admitter.
func (f *Fallback) Admit(ctx context.Context, a Admission) (Decision, error) {
	now := f.now().UnixNano() // read once: the clock is a measurable share of a degraded admission
	if now >= f.downUntil.Load() {
		d, err := f.ask(ctx, a)
		if err == nil {
			f.release(ctx) // Primary answers: it can take the held settlements
			return d, nil
		}
		if !errors.Is(err, ErrUnavailable) {
			return d, err
		}
		f.degrade(err)
		if !f.opens() {
			return Decision{}, err
		}
	} else if !f.opens() || now >= f.probeAt.Load() { // failing open, most admissions are not probes
		d, asked, err := f.probe(ctx, a, now)
		switch {
		case !asked && !f.opens():
			return Decision{}, ErrUnavailable
		case !f.opens(), asked && !errors.Is(err, ErrUnavailable):
			return d, err // Primary's answer, or a refusal under FailClosed
		}
	}
	d, err := f.Local.Admit(ctx, Share(a, f.Replicas))
	d.Reservation.local = true
	return d, err
}

// opens reports whether a degraded admission goes to the local limiter.
func (f *Fallback) opens() bool { return f.Policy == FailOpen && f.Local != nil }

// ask admits through Primary. Spend carried from an outage goes first,
// so this admission counts it; a carry failing for any other reason than
// ErrUnavailable (this request's cancellation) is left for later.
func (f *Fallback) ask(ctx context.Context, a Admission) (Decision, error) {
	if _, err := f.flushCarry(ctx); err != nil && errors.Is(err, ErrUnavailable) {
		return Decision{}, err
	}
	return f.Primary.Admit(ctx, a)
}

// probe is a degraded admission, at now, that asks Primary unless
// another probe is under way or, under FailOpen, it is too soon (asked
// is then false): an answer ends the outage at once. A probe that fails again keeps the
// outage going without calling OnDegraded: it was reported when it
// began, and a dead Primary would otherwise log once per probe. Under
// FailOpen the outage is kept past the next probe's time, so it is that
// probe, not a rush of admissions at the end of the Cooldown, that next
// asks a dead Primary.
func (f *Fallback) probe(ctx context.Context, a Admission, now int64) (d Decision, asked bool, err error) {
	open := f.opens()
	soon := func() bool { return open && now < f.probeAt.Load() }
	if soon() || !f.probing.CompareAndSwap(false, true) {
		return Decision{}, false, nil
	}
	defer f.probing.Store(false)
	if soon() { // a probe that failed since now moved probeAt past it
		return Decision{}, false, nil
	}
	d, err = f.ask(ctx, a)
	switch {
	case err == nil:
		f.downUntil.Store(0)
		f.release(ctx) // the settlements held meanwhile
	case errors.Is(err, ErrUnavailable):
		end, c := f.now(), f.cooldown()
		if open {
			f.probeAt.Store(end.Add(c).UnixNano())
			c += firstProbe(c)
		}
		f.downUntil.Store(end.Add(c).UnixNano())
	}
	return d, true, err
}

// firstProbe is how long after the failure that began an outage the
// first FailOpen probe may ask Primary: an eighth of the Cooldown.
func firstProbe(cooldown time.Duration) time.Duration { return cooldown / 8 }

// Settle implements Admitter, settling where the reservation was made. A
// local settlement's cost is also owed to Primary; a settlement of
// Primary's reservation while Primary is unreachable waits for it.
func (f *Fallback) Settle(ctx context.Context, r Reservation, actual Actual) error {
	if !r.local {
		if r.Valid() && f.Degraded() && f.hold(r, actual) {
			return nil
		}
		return f.Primary.Settle(ctx, r, actual)
	}
	if !r.Claim() {
		return nil
	}
	f.Local.settle(&r, actual)
	if _, ok := f.Primary.(SpendAdder); ok && actual.Cost != 0 {
		f.carry(r, actual.Cost)
	}
	return nil
}

// Share is a with every limit divided among n replicas: rates rounded
// down but at least 1, budgets rounded down.
func Share(a Admission, n int) Admission {
	if n <= 1 {
		return a
	}
	rates := make([]Rate, len(a.Rates))
	for i, r := range a.Rates {
		if r.RPM > 0 {
			r.RPM = max(r.RPM/int64(n), 1)
		}
		if r.TPM > 0 {
			r.TPM = max(r.TPM/int64(n), 1)
		}
		rates[i] = r
	}
	budgets := make([]Budget, len(a.Budgets))
	for i, b := range a.Budgets {
		b.Limit /= Micros(n)
		budgets[i] = b
	}
	a.Rates, a.Budgets = rates, budgets
	return a
}

var _ Admitter = (*Fallback)(nil)
