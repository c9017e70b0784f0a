package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Admitter checks and reserves every limit of a request at once, and
// settles the reservation after the call.
type Admitter interface {
	// Admit reserves the Admission in every limit it lists, or in none.
	// A refusal is a Decision with Allowed false, not an error; an error
	// means the limits could not be checked (ErrUnavailable when the
	// backend cannot be reached).
	Admit(ctx context.Context, a Admission) (Decision, error)
	// Settle replaces the reservation with the actual usage. It acts
	// once per Reservation: later calls, with it or any copy, do nothing.
	Settle(ctx context.Context, r Reservation, actual Actual) error
}

// AdmitterInto is an Admitter that writes its Decision where the caller
// keeps it. A Decision is some 300 bytes, and returned by value it is
// copied on every return between the counters and the answer's headers;
// Embedded, which decides in memory on every request of a gateway
// without Redis, implements it, and a caller uses it where there. A type
// that wraps an AdmitterInto to change what Admit does must change
// AdmitInto too (or not have it): a caller that finds AdmitInto calls
// only that.
type AdmitterInto interface {
	Admitter
	// AdmitInto is Admit with its Decision written to *d, all of it (a
	// Decision d held before is gone); on an error *d is left as it was.
	// a is read, not kept: the Reservation holds a copy of *a.
	AdmitInto(ctx context.Context, a *Admission, d *Decision) error
}

// SettlerInPlace is an Admitter that settles a reservation read where
// the caller keeps it: a Reservation is some 160 bytes, copied by value
// into every Settle. Embedded, which settles every request of a gateway
// without Redis, implements it. A type that wraps a SettlerInPlace to
// change what Settle does must change SettleInPlace too (or not have
// it): a caller that finds SettleInPlace calls only that.
type SettlerInPlace interface {
	Admitter
	// SettleInPlace is Settle of *r; r is read, not kept, and not
	// changed (the settled flag its copies share is set).
	SettleInPlace(ctx context.Context, r *Reservation, actual Actual) error
}

// ContextFreeSettler is an Admitter whose Settle reads nothing of its
// context (neither its cancellation, its deadline nor its values): it
// settles in memory. A request settling after its client has gone may
// hand such an admitter its own context as it is; any other admitter
// needs one that outlives the request (context.WithoutCancel), which
// costs an allocation a request.
type ContextFreeSettler interface {
	Admitter
	// SettlesWithoutContext marks the type; it does nothing.
	SettlesWithoutContext()
}

// ErrUnavailable wraps backend failures (Redis unreachable, timed out):
// what a FailurePolicy applies to.
var ErrUnavailable = errors.New("limit backend unavailable")

// Window is the span every rate limit is counted over: limits are per
// minute, refilled smoothly (a bucket of RPM requests refills one request
// every minute/RPM).
const Window = time.Minute

// Scope says whose limit a Rate or Budget is.
type Scope string

const (
	ScopeKey      Scope = "key"
	ScopeProject  Scope = "project"
	ScopeCustomer Scope = "customer"
	ScopeKeyModel Scope = "key_model" // ID from KeyModelID
)

// KeyModelID is the ID of a key-and-model rate limit.
func KeyModelID(keyID, model string) string { return keyID + "/" + model }

// Kind says which limit refused.
type Kind string

const (
	KindRequests Kind = "requests" // requests per minute
	KindTokens   Kind = "tokens"   // tokens per minute
	KindBudget   Kind = "budget"   // USD per period
)

// Micros is an amount of money in millionths of a US dollar.
type Micros int64

// USD converts dollars to Micros, rounding to the nearest micro-dollar
// (and saturating far beyond any real budget).
func USD(dollars float64) Micros {
	v := math.Round(dollars * 1e6)
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	if v <= math.MinInt64 {
		return math.MinInt64
	}
	return Micros(v)
}

// Dollars is m in dollars, for display.
func (m Micros) Dollars() float64 { return float64(m) / 1e6 }

// String formats m as dollars with all six decimals, e.g. "0.001250".
// Every response carries one (the cost header), so it is built in one
// allocation.
func (m Micros) String() string {
	var buf [32]byte
	return string(m.Append(buf[:0]))
}

// Append appends m.String() to b. Every answer of a budgeted key
// carries two such figures (its cost and the budget left): the dollars
// are written by AppendInt, and the point with the six decimals as one
// word of eight bytes, stored once.
func (m Micros) Append(b []byte) []byte {
	u := uint64(m)
	if m < 0 {
		b = append(b, '-')
		u = -u // math.MinInt64's magnitude too
	}
	b = AppendInt(b, int64(u/1e6)) // below 2^64/10^6: never negative
	// digitWord of the decimals (below 10^6) begins with two zero digits:
	// moved down a byte, it leaves the first byte for the point and the
	// last one empty.
	frac := digitWord(u%1e6) >> 8
	return putWord(spare(b, 8), frac+pointAndSixDigits, 7)
}

// pointAndSixDigits makes a word of a point and six digits from the
// digits in its bytes 1 to 6: '.' in byte 0, '0' added to the others.
const pointAndSixDigits = 0x0030_3030_3030_3000 | '.'

// Rate is a pair of per-minute limits on one scope. A zero RPM or TPM
// means that dimension is unlimited.
type Rate struct {
	Scope Scope
	ID    string // key ID, project ID, customer ID or KeyModelID
	Name  string // for messages; ID when empty
	RPM   int64
	TPM   int64
}

// Budget caps the spend of one scope over a period. A Budget listed in an
// Admission is enforced, whatever its Limit (zero refuses any cost).
type Budget struct {
	Scope  Scope
	ID     string
	Name   string // for messages; ID when empty
	Limit  Micros
	Period Period
}

// Admission is everything one request must pass.
type Admission struct {
	// Tag groups the counters of one request so they can be updated
	// together (the Redis Cluster hash tag): the project ID, or for a
	// principal without one, a name that is stable per project. It must
	// not contain '{' or '}'.
	Tag     string
	Rates   []Rate
	Budgets []Budget
	// Tokens is the estimate reserved in every token bucket: prompt
	// tokens plus the output cap. Settle corrects it.
	Tokens int64
	// Cost is the worst-case cost reserved in every budget.
	Cost Micros
	// Memo, when set, is where Embedded keeps the counters of
	// admissions like this one, found once (see Memo): the caller
	// passes the same Memo with every admission of one key. Other
	// admitters ignore it.
	Memo *Memo
}

// Actual is what a call really used: the tokens reported by the upstream
// (prompt + completion) and their price. A call that failed with no usage
// is the zero Actual.
type Actual struct {
	Tokens int64
	Cost   Micros
}

// Quota is the state of one bucket for the x-ratelimit-* headers. A zero
// Limit means no such limit applies.
type Quota struct {
	Limit     int64
	Remaining int64
	Reset     time.Duration // until the bucket is full again
}

// Refusal names the limit that refused a request.
type Refusal struct {
	Scope  Scope
	ID     string
	Name   string
	Kind   Kind
	Period Period // budgets only
	// TooLarge is set when the request alone exceeds the limit (more
	// estimated tokens than the TPM, a worst-case cost above the whole
	// budget): waiting will not help.
	TooLarge bool
}

// Code is the error code for the client: "budget_exceeded" or
// "rate_limit_exceeded".
func (r Refusal) Code() string {
	if r.Kind == KindBudget {
		return "budget_exceeded"
	}
	return "rate_limit_exceeded"
}

// Message says which limit refused, in words safe to show the client.
func (r Refusal) Message() string {
	who := r.Name
	if who == "" {
		who = r.ID
	}
	scope := string(r.Scope)
	if r.Scope == ScopeKeyModel {
		scope = "key and model"
	}
	switch r.Kind {
	case KindBudget:
		if r.TooLarge {
			return fmt.Sprintf("request's worst-case cost exceeds the budget of %s %s (%s)", scope, who, r.Period)
		}
		return fmt.Sprintf("budget of %s %s (%s) exhausted", scope, who, r.Period)
	case KindTokens:
		if r.TooLarge {
			return fmt.Sprintf("request's estimated tokens exceed the tokens-per-minute limit of %s %s", scope, who)
		}
		return fmt.Sprintf("tokens-per-minute limit of %s %s reached", scope, who)
	default:
		return fmt.Sprintf("requests-per-minute limit of %s %s reached", scope, who)
	}
}

// Decision is the outcome of Admit.
type Decision struct {
	Allowed bool
	Refused Refusal // zero when Allowed
	// RetryAfter is, for a rate refusal, when the same request would
	// pass (0 when TooLarge); for a budget refusal, the time until the
	// period ends (0 for total budgets).
	RetryAfter time.Duration
	// Requests and Tokens describe the binding request and token
	// buckets (the ones with the least left), after this admission.
	Requests, Tokens Quota
	// Reservation is what Settle takes; zero when refused.
	Reservation Reservation
	// Budgeted says the request is subject to a budget; BudgetLeft is
	// then the least any of its budgets has left after this admission
	// (spent and reserved taken off, this request's worst case included
	// when admitted; never below zero).
	Budgeted   bool
	BudgetLeft Micros
}

// noteBudget lowers d's BudgetLeft to what a budget of limit with used
// spent and reserved has left.
func (d *Decision) noteBudget(limit, used int64) {
	left := Micros(max(limit-used, 0))
	if !d.Budgeted || left < d.BudgetLeft {
		d.BudgetLeft = left
	}
	d.Budgeted = true
}

// NoteBudget is noteBudget for admitters outside this package.
func (d *Decision) NoteBudget(limit, used int64) { d.noteBudget(limit, used) }

// Reservation is what one admitted request holds until it settles. Copies
// share one settled flag.
type Reservation struct {
	// ID names the reservation to the backend that made it (Redis: the
	// key of its settlement record); empty for Embedded, which settles
	// from the admission itself.
	ID        string
	Admission Admission
	At        time.Time // when it was admitted: fixes the budget periods it counts in
	settled   *atomic.Bool
	local     bool       // admitted by a Fallback's local limiter
	lease     *leaseHold // admitted by a Leaser against these leases
	held      *heldCells // the counters an Embedded admission reserved in
}

// NewReservation is how backends outside this package make one.
func NewReservation(id string, a Admission, at time.Time) Reservation {
	return Reservation{ID: id, Admission: a, At: at, settled: new(atomic.Bool)}
}

// Claim reports whether this is the first claim on r (or any copy):
// Settle implementations call it and do nothing when it is false. The
// zero Reservation is never claimed.
func (r Reservation) Claim() bool {
	return r.settled != nil && r.settled.CompareAndSwap(false, true)
}

// Valid reports whether r came from an admission (not the zero value).
func (r Reservation) Valid() bool { return r.settled != nil }

// remaining is how many whole units of a bucket of limit per Window are
// free when its theoretical arrival time is tat (same unit as now and
// window).
func remaining(limit, tat, now, window int64) int64 {
	used := max(tat-now, 0)
	if used >= window {
		return 0
	}
	// (window-used)*limit/window without overflow for any sane limit.
	return int64(float64(window-used) * float64(limit) / float64(window))
}

// increment is the time cost of n units in a bucket of limit per window,
// rounded down (lenient by under one unit of time per call, so a bucket
// of 7 per minute really admits 7).
func increment(n, limit, window int64) int64 {
	if limit <= 0 {
		return 0
	}
	if n <= math.MaxInt64/window {
		return n * window / limit
	}
	return int64(float64(n) * float64(window) / float64(limit))
}
