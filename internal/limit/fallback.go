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

// Fallback is an Admitter that uses Primary and, when Primary returns
// ErrUnavailable, applies Policy. After a failure it stays on the local
// path for Cooldown before trying Primary again, so an outage does not
// add Primary's timeout to every request.
//
// While degraded, budgets too are enforced per replica share, counted
// from zero at the start of each outage: a replica cannot see what the
// others spent, so an outage can let up to one whole budget (the sum of
// the shares) through on top of what was spent before it.
type Fallback struct {
	Primary Admitter
	Local   *Embedded // used only under FailOpen; required then
	Policy  FailurePolicy
	// Replicas is how many gateway replicas share the limits; each
	// enforces 1/Replicas of every limit while degraded (at least 1).
	Replicas int
	// Cooldown is how long to stay degraded after a failure (1s when 0).
	Cooldown time.Duration
	// OnDegraded, when set, is called with each Primary failure.
	OnDegraded func(error)

	downUntil atomic.Int64 // Unix nanoseconds
}

// Degraded reports whether the last Primary failure is within Cooldown.
func (f *Fallback) Degraded() bool { return time.Now().UnixNano() < f.downUntil.Load() }

// Admit implements Admitter.
func (f *Fallback) Admit(ctx context.Context, a Admission) (Decision, error) {
	if !f.Degraded() {
		d, err := f.Primary.Admit(ctx, a)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return d, err
		}
		cool := f.Cooldown
		if cool <= 0 {
			cool = time.Second
		}
		f.downUntil.Store(time.Now().Add(cool).UnixNano())
		if f.OnDegraded != nil {
			f.OnDegraded(err)
		}
		if f.Policy != FailOpen || f.Local == nil {
			return Decision{}, err
		}
	} else if f.Policy != FailOpen || f.Local == nil {
		return Decision{}, ErrUnavailable
	}
	d, err := f.Local.Admit(ctx, Share(a, f.Replicas))
	d.Reservation.local = true
	return d, err
}

// Settle implements Admitter, settling where the reservation was made.
func (f *Fallback) Settle(ctx context.Context, r Reservation, actual Actual) error {
	if r.local {
		return f.Local.Settle(ctx, r, actual)
	}
	return f.Primary.Settle(ctx, r, actual)
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
