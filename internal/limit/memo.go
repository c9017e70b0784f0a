package limit

import (
	"sync/atomic"
	"time"
)

// Memo is where Embedded keeps, for admissions that come back with the
// same limits (those of one API key), the counters they touch: sorted,
// without duplicates, each with its cell. An admission that carries a
// Memo (Admission.Memo) and matches one of its plans skips listing,
// sorting and looking up its counters — an owner's hint found by hashing
// its ID, and every counter's key compared there — and locks the kept
// cells directly.
//
// A plan is only a shortcut to what the admission would find anyway:
// it is used only when the admission's rates and budgets equal those it
// was made from (values included), by the admitter that made it, on the
// UTC day it was made (the start of a dated budget's period), and while
// none of its counters has been swept (checked under each counter's
// lock). Anything else takes the ordinary path, so a stale plan costs
// time, never a wrong count.
//
// The zero Memo is empty and ready; a nil *Memo keeps nothing. It is
// safe for concurrent use. The caller keeps one per set of limits it
// admits against, and with it, a key's principal.
type Memo struct {
	plans [memoPlans]atomic.Pointer[plan]
	// template is the caller's Template of these admissions, kept with
	// them (KeepTemplate); nil until one is.
	template atomic.Pointer[Template]
	// aside is another admitter's shortcut for these admissions
	// (KeepAside); nil until one keeps one.
	aside atomic.Pointer[any]
}

// Aside returns what an admitter other than Embedded kept in m for these
// admissions (KeepAside): nil when none is, or m is nil. The keeper
// checks that it still applies, as Embedded checks its plans (a Shape's
// Fits, and whatever else it depends on).
func (m *Memo) Aside() any {
	if m == nil {
		return nil
	}
	if v := m.aside.Load(); v != nil {
		return *v
	}
	return nil
}

// KeepAside keeps v in m for Aside, in place of what was kept before. It
// does nothing when m is nil. One admitter keeps one thing there: the
// Redis limiter, the keys its admissions of this shape name.
func (m *Memo) KeepAside(v any) {
	if m != nil {
		m.aside.Store(&v)
	}
}

// Shape is the rates and budgets an admission lists, kept by an admitter
// that made something of them once, to tell the later admissions it
// applies to (Fits). Names are not kept: they are read from each
// admission, for a refusal's message only.
type Shape struct {
	// template is the Template whose slices the admission listed (nil:
	// not one): an admission that lists them too fits without its rates
	// and budgets compared.
	template *Template
	rates    []Rate
	budgets  []Budget
}

// ShapeOf keeps the shape of a: copies of its rates and budgets, and the
// Template of its Memo when a lists that Template's slices.
func ShapeOf(a *Admission) Shape {
	s := Shape{rates: append([]Rate(nil), a.Rates...), budgets: append([]Budget(nil), a.Budgets...)}
	if t := a.Memo.Template(); t != nil && t.listedBy(a) {
		s.template = t
	}
	for i := range s.rates {
		s.rates[i].Name = ""
	}
	for i := range s.budgets {
		s.budgets[i].Name = ""
	}
	return s
}

// Fits reports whether a lists the rates and budgets s was made from.
func (s *Shape) Fits(a *Admission) bool {
	if s.template != nil && s.template.listedBy(a) {
		return true
	}
	if len(a.Rates) != len(s.rates) || len(a.Budgets) != len(s.budgets) {
		return false
	}
	for i := range s.rates {
		r, q := &a.Rates[i], &s.rates[i]
		if r.RPM != q.RPM || r.TPM != q.TPM || r.Scope != q.Scope || r.ID != q.ID {
			return false
		}
	}
	for i := range s.budgets {
		b, q := &a.Budgets[i], &s.budgets[i]
		if b.Limit != q.Limit || b.Period != q.Period || b.Scope != q.Scope || b.ID != q.ID {
			return false
		}
	}
	return true
}

// Template returns the Template kept in m; nil when none is (or m is
// nil). The caller checks, by its Source, that it still applies.
func (m *Memo) Template() *Template {
	if m == nil {
		return nil
	}
	return m.template.Load()
}

// KeepTemplate keeps t in m unless m keeps one already: the first kept
// stays (a Memo goes with one key's principal, which is not changed
// once made; a copy changed since, which shares it, finds the kept
// Template's Source not its own and builds its admissions itself). It
// does nothing when m is nil.
func (m *Memo) KeepTemplate(t *Template) {
	if m != nil {
		m.template.CompareAndSwap(nil, t)
	}
}

// memoPlans is how many shapes of admission a Memo keeps: a key's own,
// and a few more for per-model rates or customers' budgets. A shape
// beyond them takes the ordinary path and evicts none of them (only a
// stale plan is replaced), so a key with many shapes costs no allocation
// a request.
const memoPlans = 4

// plan is what an Embedded admission of one shape found: its ops as
// ops and lockAll left them (cost aside, which is the request's), the
// rates and budgets they were made from, and the cells a reservation
// keeps for its settle. Never changed once kept, but for flags, where
// its reservations take their settled flags.
type plan struct {
	e     *Embedded
	shape Shape
	day   int64 // the UTC day (Unix days) the budgets' periods were found for
	dated bool  // some budget has a period that starts over (day is checked)
	ops   []op
	held  heldCells
	flags flagSource
}

// flagSource hands out settled flags (Reservation.settled) from slabs
// of flagSlabSize, so that a reservation of a plan costs an allocation
// once in flagSlabSize admissions instead of one each. Each flag is
// given out once and never reused: a reservation and its copies own it
// as they would a flag of their own, and a slab stays alive (some 70
// bytes) while any reservation holds one of its flags. The zero
// flagSource is ready; it is safe for concurrent use.
type flagSource struct {
	cur atomic.Pointer[flagSlab]
}

// flagSlabSize is how many flags a slab holds: the allocation per
// admission it saves (a 1-byte flag took a 16-byte tiny block's share
// and the allocator's call) is paid once in this many.
const flagSlabSize = 64

// flagSlab is a run of settled flags; next counts those taken (it may
// run past flagSlabSize when admissions race for its last ones).
type flagSlab struct {
	next  atomic.Uint32
	flags [flagSlabSize]atomic.Bool
}

// take returns a settled flag, false, that no one else has been given.
func (s *flagSource) take() *atomic.Bool {
	if slab := s.cur.Load(); slab != nil {
		if i := slab.next.Add(1) - 1; i < flagSlabSize {
			return &slab.flags[i]
		}
	}
	// None yet, or this one is used up: a new slab, whose first flag is
	// this caller's. Two callers that both found it used up each make
	// one; the slab stored last serves the next admissions, and each
	// keeps its own first flag either way.
	slab := new(flagSlab)
	slab.next.Store(1)
	s.cur.Store(slab)
	return &slab.flags[0]
}

// find returns the plan of m that a fits, made by e and current at now;
// else nil and the slot a new plan may take (a free or stale one), or
// -1 when every slot holds a current plan of another shape.
func (m *Memo) find(e *Embedded, a *Admission, now time.Time) (p *plan, slot int) {
	if m == nil {
		return nil, -1
	}
	slot = -1
	for i := range m.plans {
		q := m.plans[i].Load()
		switch {
		case q == nil || q.e != e:
			if slot < 0 {
				slot = i
			}
		case !q.shape.Fits(a):
		case q.dated && q.day != floorDiv(now.Unix(), 86400):
			return nil, i // a new day: its periods may have started over
		default:
			return q, i
		}
	}
	return nil, slot
}

// keep stores p in slot i of m (nothing when m is nil or i < 0).
func (m *Memo) keep(i int, p *plan) {
	if m != nil && i >= 0 {
		m.plans[i].Store(p)
	}
}

// newPlan makes the plan of admission a from its ops, sorted and with
// their cells found (lockAll's work), for the UTC day of now.
func (e *Embedded) newPlan(a *Admission, ops []op, now time.Time) *plan {
	p := &plan{
		e:     e,
		shape: ShapeOf(a),
		day:   floorDiv(now.Unix(), 86400),
		ops:   append([]op(nil), ops...),
		held:  heldCells{e: e},
	}
	for i := range a.Budgets {
		p.dated = p.dated || periodIndex(a.Budgets[i].Period) >= 0
	}
	p.held.hold(p.ops)
	return p
}

// lockLive locks the cells of ops in order and reports true when none
// of them has been swept; otherwise it leaves them all unlocked.
func lockLive(ops []op) bool {
	for i := range ops {
		ops[i].c.mu.Lock()
		if ops[i].c.dead {
			for j := 0; j <= i; j++ {
				ops[j].c.mu.Unlock()
			}
			return false
		}
	}
	return true
}
