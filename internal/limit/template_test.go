package limit

import (
	"context"
	"testing"
	"time"
)

// TestNewTemplateCopies: a Template keeps copies of what it was made
// from, capped, so that neither a change to the caller's slices nor an
// append to its own reaches it.
func TestNewTemplateCopies(t *testing.T) {
	rates := make([]Rate, 1, 4)
	rates[0] = keyRate("k", 5, 0)
	budgets := []Budget{{Scope: ScopeKey, ID: "k", Limit: 10, Period: Day}}
	tm := NewTemplate(rates, budgets, "src")
	rates[0].RPM, budgets[0].Limit = 50, 100
	if tm.Rates()[0].RPM != 5 || tm.Budgets()[0].Limit != 10 {
		t.Fatalf("the template follows its maker's slices: %+v %+v", tm.Rates(), tm.Budgets())
	}
	if cap(tm.Rates()) != 1 || cap(tm.Budgets()) != 1 {
		t.Errorf("caps %d and %d: an append would write into the template's arrays", cap(tm.Rates()), cap(tm.Budgets()))
	}
	if tm.Source() != "src" {
		t.Errorf("source %v", tm.Source())
	}
}

// TestMemoKeepsFirstTemplate: a Memo keeps the first Template it is
// given; a nil Memo keeps none.
func TestMemoKeepsFirstTemplate(t *testing.T) {
	var m Memo
	if m.Template() != nil {
		t.Fatal("the zero Memo has a template")
	}
	a, b := NewTemplate(nil, nil, 1), NewTemplate(nil, nil, 2)
	m.KeepTemplate(a)
	m.KeepTemplate(b)
	if m.Template() != a {
		t.Errorf("kept %v, want the first", m.Template().Source())
	}
	var nilMemo *Memo
	nilMemo.KeepTemplate(a)
	if nilMemo.Template() != nil {
		t.Error("a nil Memo keeps a template")
	}
}

// TestTemplatePlan: admissions that list a Memo's Template use the plan
// made from it, and are decided as the same admissions without a Memo;
// an admission that lists other slices with other values of the same
// shape (another Template, a key whose rpm was edited) is decided by
// its own values, never by the plan's; and one that lists equal values
// in other slices still fits the plan.
func TestTemplatePlan(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	with := newEmbedded(t, Options{Now: clk.Now, SweepEvery: time.Hour})
	without := newEmbedded(t, Options{Now: clk.Now, SweepEvery: time.Hour})
	memo := new(Memo)
	budget := []Budget{{Scope: ScopeKey, ID: "k", Limit: 1000, Period: Day}}
	six := NewTemplate([]Rate{keyRate("k", 6, 0)}, budget, nil)
	three := NewTemplate([]Rate{keyRate("k", 3, 0)}, budget, nil)
	memo.KeepTemplate(six)
	admit := func(tm *Template, rates []Rate, budgets []Budget) bool {
		t.Helper()
		if tm != nil {
			rates, budgets = tm.Rates(), tm.Budgets()
		}
		var d, want Decision
		if err := with.AdmitInto(ctx, &Admission{Rates: rates, Budgets: budgets, Cost: 10, Memo: memo}, &d); err != nil {
			t.Fatal(err)
		}
		if err := without.AdmitInto(ctx, &Admission{Rates: rates, Budgets: budgets, Cost: 10}, &want); err != nil {
			t.Fatal(err)
		}
		if viewOf(&d) != viewOf(&want) {
			t.Fatalf("with the template's plan %+v, without a Memo %+v", viewOf(&d), viewOf(&want))
		}
		return d.Allowed
	}
	admit(six, nil, nil)
	p, _ := memo.find(with, &Admission{Rates: six.Rates(), Budgets: six.Budgets()}, clk.Now())
	if p == nil || p.shape.template != six {
		t.Fatalf("no plan made from the template: %+v", p)
	}
	// Three admitted under rpm 3 (the first of rpm 6 among them), then
	// refused: the plan of six is not used for three's values.
	for i, want := range []bool{true, true, false} {
		if got := admit(three, nil, nil); got != want {
			t.Fatalf("admission %d under rpm 3: allowed %v, want %v", i+2, got, want)
		}
	}
	// Equal values in slices of the caller's: the plan fits them.
	if p, _ := memo.find(with, &Admission{Rates: []Rate{keyRate("k", 6, 0)}, Budgets: append([]Budget(nil), budget...)}, clk.Now()); p == nil || p.shape.template != six {
		t.Errorf("equal values in other slices: plan %+v, want the template's", p)
	}
	// Under rpm 6 the bucket (10s a request, 50s used by one request
	// of rpm 6 and two of rpm 3) takes one more request, not two.
	if !admit(nil, []Rate{keyRate("k", 6, 0)}, budget) {
		t.Fatal("admission under rpm 6 refused with room for one")
	}
	if admit(six, nil, nil) {
		t.Fatal("admission under rpm 6 allowed with the bucket full")
	}
}
