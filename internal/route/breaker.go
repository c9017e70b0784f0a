package route

import (
	"sync"
	"time"
)

// BreakerConfig tunes the circuit breaker every deployment of a generation
// has. The zero value never opens.
type BreakerConfig struct {
	// Failures opens the breaker after this many failures in a row; 0
	// disables the rule.
	Failures int
	// ErrorRate opens it when failures/attempts over Window reach this
	// ratio (0 < ErrorRate ≤ 1) once MinRequests attempts were seen;
	// 0 disables the rule.
	ErrorRate   float64
	MinRequests int
	Window      time.Duration
	// Cooldown is how long an open breaker keeps the deployment out of
	// selection before one probe request may try it (half-open).
	Cooldown time.Duration
}

// BreakerState is where a breaker stands; the values are exported as the
// gatehouse_breaker_state gauge.
type BreakerState int

const (
	Closed   BreakerState = 0 // traffic flows
	HalfOpen BreakerState = 1 // one probe is allowed; its outcome decides
	Open     BreakerState = 2 // skipped by selection until Cooldown passes
)

func (s BreakerState) String() string {
	switch s {
	case HalfOpen:
		return "half_open"
	case Open:
		return "open"
	}
	return "closed"
}

// windowBuckets is how finely the error-rate window slides.
const windowBuckets = 10

type bucket struct {
	start     time.Time
	ok, fails int
}

// breaker is one deployment's circuit breaker. Time is always passed in,
// so tests drive it with a fake clock.
type breaker struct {
	cfg BreakerConfig

	mu          sync.Mutex
	state       BreakerState
	consecutive int
	openedAt    time.Time
	lastFailure time.Time
	probing     bool // a half-open probe is in flight
	buckets     [windowBuckets]bucket
}

// availableLocked reports whether selection may choose the deployment now
// without bypassing the breaker.
func (b *breaker) availableLocked(now time.Time) bool {
	switch b.state {
	case Open:
		return now.Sub(b.openedAt) >= b.cfg.Cooldown
	case HalfOpen:
		return !b.probing
	}
	return true
}

func (b *breaker) available(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.availableLocked(now)
}

// take records that an attempt was sent. An open breaker whose cooldown
// is over turns half-open and the attempt becomes its probe. probe says
// whether this attempt is the probe; changed whether the state moved.
func (b *breaker) take(now time.Time) (probe, changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && now.Sub(b.openedAt) >= b.cfg.Cooldown {
		b.state, changed = HalfOpen, true
	}
	if b.state == HalfOpen && !b.probing {
		b.probing = true
		return true, changed
	}
	return false, changed
}

// record feeds one attempt's outcome and returns the new state and whether
// it changed. A neutral outcome (the client left) only frees the probe.
func (b *breaker) record(now time.Time, o Outcome, probe bool) (BreakerState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	before := b.state
	switch o {
	case Success:
		b.consecutive = 0
		b.count(now, true)
		// A probe's success closes the breaker, and so does the success
		// of a last-resort attempt that bypassed an open one.
		if (b.state == HalfOpen && probe) || b.state == Open {
			b.state = Closed
			b.buckets = [windowBuckets]bucket{}
		}
	case Failure:
		b.consecutive++
		b.lastFailure = now
		b.count(now, false)
		switch {
		case b.state == HalfOpen && probe:
			b.open(now)
		case b.state == Closed && b.tripped(now):
			b.open(now)
		}
	}
	return b.state, b.state != before
}

func (b *breaker) open(now time.Time) {
	b.state, b.openedAt = Open, now
}

// tripped reports whether either opening rule holds.
func (b *breaker) tripped(now time.Time) bool {
	if b.cfg.Failures > 0 && b.consecutive >= b.cfg.Failures {
		return true
	}
	if b.cfg.ErrorRate <= 0 || b.cfg.Window <= 0 {
		return false
	}
	var ok, fails int
	for _, bk := range b.buckets {
		if now.Sub(bk.start) < b.cfg.Window {
			ok += bk.ok
			fails += bk.fails
		}
	}
	total := ok + fails
	return total > 0 && total >= b.cfg.MinRequests && float64(fails)/float64(total) >= b.cfg.ErrorRate
}

// count adds an outcome to the bucket of now, recycling a stale bucket.
func (b *breaker) count(now time.Time, ok bool) {
	if b.cfg.Window <= 0 {
		return
	}
	width := b.cfg.Window / windowBuckets
	if width <= 0 {
		width = 1
	}
	slot := now.Truncate(width)
	bk := &b.buckets[int(slot.UnixNano()/int64(width))%windowBuckets]
	if !bk.start.Equal(slot) {
		*bk = bucket{start: slot}
	}
	if ok {
		bk.ok++
	} else {
		bk.fails++
	}
}

// inherit takes o's state (not its config), without o's probe in flight.
func (b *breaker) inherit(o *breaker) {
	o.mu.Lock()
	state, consecutive, openedAt, lastFailure, buckets := o.state, o.consecutive, o.openedAt, o.lastFailure, o.buckets
	o.mu.Unlock()
	b.mu.Lock()
	b.state, b.consecutive, b.openedAt, b.lastFailure, b.buckets = state, consecutive, openedAt, lastFailure, buckets
	b.probing = false
	b.mu.Unlock()
}

func (b *breaker) snapshot() (BreakerState, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.lastFailure
}
