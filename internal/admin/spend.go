package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
)

// Budgets reads how much of a budget is spent from the limiter that
// enforces it: its own counter, settled spend plus the reservations of
// requests in flight, so the figure is the one the next admission is
// checked against. cmd/gatehouse adapts whichever limiter runs (the
// in-process one, or Redis, shared by every replica).
type Budgets interface {
	// Spent returns the spend of each budget in its period containing t,
	// in order. One call answers a whole page of a list.
	Spent(ctx context.Context, bs []BudgetRef, t time.Time) ([]limit.Micros, error)
}

// BudgetRef names one budget of a record.
type BudgetRef struct {
	Scope limit.Scope // key, project or customer
	ID    string      // the record's ID
	// ProjectID is the project the record belongs to (a project's own
	// ID): the limiter files a request's counters under its project.
	ProjectID string
	Period    limit.Period
}

// Spend is what a budget has spent in its current period, as the API
// shows it next to the budget (read-only). Money is in the decimal
// strings of cost_usd; a total budget has no period bounds.
type Spend struct {
	USD          string     `json:"usd"`
	PeriodStart  *time.Time `json:"period_start,omitempty"`
	ResetsAt     *time.Time `json:"resets_at,omitempty"`
	RemainingUSD string     `json:"remaining_usd"` // never below zero
}

// newSpend is the Spend of a budget of amount with spent counted in its
// period containing now.
func newSpend(spent, amount limit.Micros, p limit.Period, now time.Time) *Spend {
	s := &Spend{USD: spent.String(), RemainingUSD: limit.Micros(0).String()}
	if spent < amount {
		s.RemainingUSD = (amount - spent).String()
	}
	start, end := p.Span(now)
	if start != "" {
		if t, err := time.Parse(time.DateOnly, start); err == nil {
			s.PeriodStart, s.ResetsAt = &t, &end
		}
	}
	return s
}

// spendSlot is one budget whose spend an answer shows, and the field
// that shows it.
type spendSlot struct {
	ref    BudgetRef
	amount limit.Micros // the budget
	dst    **Spend
}

// budgetSlots appends the slot of b, a record's budget, when it has one.
func budgetSlots(slots []spendSlot, scope limit.Scope, id, projectID string, b *auth.Budget, dst **Spend) []spendSlot {
	if b == nil {
		return slots
	}
	p, err := limit.ParsePeriod(b.Period)
	if err != nil {
		p = limit.Total // as admission reads it: records are validated on write
	}
	return append(slots, spendSlot{ref: BudgetRef{Scope: scope, ID: id, ProjectID: projectID, Period: p}, amount: limit.USD(b.USD), dst: dst})
}

// fillSpend looks up the spend of every slot in one call and sets each
// field. Without Budgets nothing is set. A failed lookup (Redis
// unreachable) sets nothing either and is logged: the records are still
// answered, without their spend, rather than not at all.
func (h *Handler) fillSpend(r *http.Request, slots []spendSlot) {
	if h.o.Budgets == nil || len(slots) == 0 {
		return
	}
	refs := make([]BudgetRef, len(slots))
	for i := range slots {
		refs[i] = slots[i].ref
	}
	now := h.o.Now()
	got, err := h.o.Budgets.Spent(r.Context(), refs, now)
	if err == nil && len(got) != len(refs) {
		err = fmt.Errorf("%d figures for %d budgets", len(got), len(refs))
	}
	if err != nil {
		h.o.Log.Warn("admin: budget spend unavailable; answering without it", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		return
	}
	for i, s := range slots {
		*s.dst = newSpend(got[i], s.amount, s.ref.Period, now)
	}
}

// projectView is a project as the API shows it.
type projectView struct {
	auth.Project
	Spend *Spend `json:"spend,omitempty"`
}

func (h *Handler) projectViews(r *http.Request, ps []auth.Project) []projectView {
	views := make([]projectView, len(ps))
	var slots []spendSlot
	for i := range ps {
		v := &views[i]
		v.Project = ps[i]
		slots = budgetSlots(slots, limit.ScopeProject, v.ID, v.ID, v.Budget, &v.Spend)
	}
	h.fillSpend(r, slots)
	return views
}

func (h *Handler) projectView(r *http.Request, p *auth.Project) projectView {
	return h.projectViews(r, []auth.Project{*p})[0]
}

// keysSpend fills the spend of keys' budgets.
func (h *Handler) keysSpend(r *http.Request, views []keyView) {
	var slots []spendSlot
	for i := range views {
		v := &views[i]
		slots = budgetSlots(slots, limit.ScopeKey, v.ID, v.ProjectID, v.Budget, &v.Spend)
	}
	h.fillSpend(r, slots)
}

// keyView is view with the spend of the key's budget.
func (h *Handler) keyView(r *http.Request, k *auth.Key) keyView {
	v := []keyView{h.view(k)}
	h.keysSpend(r, v)
	return v[0]
}

// customerView is a customer as the API shows it: each of its budgets
// with its spend.
type customerView struct {
	auth.Customer
	DailySpend   *Spend `json:"daily_spend,omitempty"`
	MonthlySpend *Spend `json:"monthly_spend,omitempty"`
}

func (h *Handler) customerViews(r *http.Request, cs []auth.Customer) []customerView {
	views := make([]customerView, len(cs))
	var slots []spendSlot
	for i := range cs {
		v := &views[i]
		v.Customer = cs[i]
		if v.DailyUSD != nil {
			slots = budgetSlots(slots, limit.ScopeCustomer, v.ID, v.ProjectID, &auth.Budget{USD: *v.DailyUSD, Period: auth.PeriodDay}, &v.DailySpend)
		}
		if v.MonthlyUSD != nil {
			slots = budgetSlots(slots, limit.ScopeCustomer, v.ID, v.ProjectID, &auth.Budget{USD: *v.MonthlyUSD, Period: auth.PeriodMonth}, &v.MonthlySpend)
		}
	}
	h.fillSpend(r, slots)
	return views
}

func (h *Handler) customerView(r *http.Request, c *auth.Customer) customerView {
	return h.customerViews(r, []auth.Customer{*c})[0]
}

// viewList turns a page of records into a page of their views: views is
// called on the page alone, not on the extra record fetched to see
// whether there are more.
func viewList[T, V any](l list[T], views func([]T) []V) list[V] {
	return list[V]{Object: l.Object, Data: views(l.Data), HasMore: l.HasMore, NextAfter: l.NextAfter}
}
