package redis

import (
	"slices"
	"sync/atomic"
	"time"

	"gatehouse/internal/limit"
)

// shape is what the admissions of one shape — a key's rates and budgets,
// the same from one request to the next — name in Redis, found once:
// their counters' keys, each once, in the order admitScript takes them,
// what each counts, and for their settles the token buckets and budget
// counters. Finding them was a map look-up a counter (its name hashed),
// a comparison with every key before it, and each budget's period
// worked out, on every admission and again on its settle. A shape is
// never changed once made; admissions share its slices, read-only.
type shape struct {
	l   *Limiter
	fit limit.Shape
	raw string // the admissions' Tag
	q   *tagQueue
	// day is the UTC day (Unix days) the budgets' periods were found
	// for; only a shape with a budget whose period starts over (dated)
	// is bound to it.
	day   int64
	dated bool

	keys   []string // the counters (rates, then budgets), then with budgets the seeded marker (with a durable record) and the ledger
	refs   []ref    // per counter; cost and inc are each admission's own
	nr, nb int      // rate buckets and budget counters among keys
	exps   []int64  // per budget counter: its expiry (Unix ms; 0: none)
	// starts is, per budget of the admission (not per counter), the
	// start of its period: the durable record's key of its spend.
	starts []string
	// tokens are the token buckets a settle corrects (delta 0: each
	// settle's own).
	tokens []tokenDelta
}

// budgetKeys are the budget counters' keys among s.keys, capped so that
// an append to them cannot write into s.keys.
func (s *shape) budgetKeys() []string { return s.keys[s.nr : s.nr+s.nb : s.nr+s.nb] }

// shapes are the shapes a Memo keeps for the Redis limiter: as many as
// Embedded keeps plans, for a key's own limits and a few per-model or
// per-customer variants. A shape beyond them takes the slot of the
// oldest.
type shapes struct {
	slots [4]atomic.Pointer[shape]
	next  atomic.Uint32
}

// shapeOf returns the shape of a at now: the one its Memo keeps when it
// applies, else a new one, kept there.
func (l *Limiter) shapeOf(a *limit.Admission, now time.Time) *shape {
	kept, _ := a.Memo.Aside().(*shapes)
	day := unixDay(now)
	if kept != nil {
		for i := range kept.slots {
			if s := kept.slots[i].Load(); s != nil && s.l == l && s.raw == a.Tag && (!s.dated || s.day == day) && s.fit.Fits(a) {
				return s
			}
		}
	}
	s := l.newShape(a, now)
	if a.Memo == nil {
		return s
	}
	if kept == nil {
		kept = new(shapes)
		a.Memo.KeepAside(kept)
	}
	kept.slots[(kept.next.Add(1)-1)%uint32(len(kept.slots))].Store(s)
	return s
}

func unixDay(t time.Time) int64 {
	d := t.Unix() / 86400
	if t.Unix() < 0 && t.Unix()%86400 != 0 {
		d--
	}
	return d
}

// newShape finds what admission a names at now: each counter once (a
// counter listed twice is reserved once, as the first listing says).
func (l *Limiter) newShape(a *limit.Admission, now time.Time) *shape {
	q := l.queueOf(a.Tag)
	s := &shape{l: l, fit: limit.ShapeOf(a), raw: a.Tag, q: q, day: unixDay(now)}
	n := 2*len(a.Rates) + len(a.Budgets)
	keys := make([]string, 0, n+2)
	s.refs = make([]ref, 0, n)
	add := func(k string, r ref) bool {
		if slices.Contains(keys, k) {
			return false
		}
		keys = append(keys, k)
		s.refs = append(s.refs, r)
		return true
	}
	for i, r := range a.Rates {
		if r.RPM > 0 {
			add(l.name(q, keyName{kind: "rq", scope: r.Scope, id: r.ID}), ref{kind: limit.KindRequests, src: i, limit: r.RPM})
		}
		if r.TPM > 0 {
			k := l.name(q, keyName{kind: "rt", scope: r.Scope, id: r.ID})
			if add(k, ref{kind: limit.KindTokens, src: i, limit: r.TPM}) {
				s.tokens = append(s.tokens, tokenDelta{key: k, limit: r.TPM})
			}
		}
	}
	s.nr = len(keys)
	s.starts = make([]string, len(a.Budgets))
	for i := range a.Budgets {
		b := &a.Budgets[i]
		start, end := b.Period.Span(now)
		s.starts[i] = start
		s.dated = s.dated || !end.IsZero()
		exp := int64(0)
		if !end.IsZero() {
			exp = end.Add(budgetGrace).UnixMilli()
		}
		if add(l.name(q, keyName{kind: "b", scope: b.Scope, period: b.Period, start: start, id: b.ID}), ref{kind: limit.KindBudget, src: i, limit: int64(b.Limit), end: end}) {
			s.exps = append(s.exps, exp)
		}
	}
	s.nb = len(keys) - s.nr
	if s.nb > 0 {
		// The reservation goes into the tag's ledger, and with a durable
		// record the counters must be known to be in Redis.
		if l.store != nil {
			keys = append(keys, q.seeded)
		}
		keys = append(keys, q.ledger)
	}
	s.keys = slices.Clip(keys)
	return s
}
