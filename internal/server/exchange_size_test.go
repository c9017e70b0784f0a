package server

import (
	"net/http/httptest"
	"slices"
	"testing"
	"unsafe"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// exchangeSizeClass is the allocator's size class the exchange is to
// fit: every request allocates one, and a stream holds it for as long
// as it runs. The next class up is 2,048 bytes.
const exchangeSizeClass = 1792

// TestExchangeSizeClass: the exchange stays in its size class. A field
// added that takes it over should be found room for (a flag beside the
// other flags, a rarely used part moved behind a pointer), not let take
// every request and every open stream 256 bytes more.
func TestExchangeSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(exchange{}); n > exchangeSizeClass {
		t.Errorf("the exchange is %d bytes, over the %d-byte size class", n, exchangeSizeClass)
	}
}

// TestAdmissionBeyondItsArrays: a key with more rates and budgets than
// the admission's arrays hold (a rate per model, project rates, budgets
// of key, project and customer by day and month) gets every one in its
// Admission, in order.
func TestAdmissionBeyondItsArrays(t *testing.T) {
	s, _ := newTestServer(t)
	_, prices := embeddedLimits(t)
	rt := *s.Runtime()
	rt.Limits = &Limits{Prices: prices}
	x := &exchange{s: s, rt: &rt, r: httptest.NewRequest("POST", "/v1/chat/completions", nil)}
	day, month := 1.0, 20.0
	x.principal = &auth.Principal{KeyID: "key1", Name: "bot", Project: "p", ProjectID: "proj1", RPM: 10, TPM: 1000,
		ModelLimits:   map[string]auth.Limits{"m": {RPM: 5}},
		ProjectLimits: auth.Limits{RPM: 100},
		Budget:        &auth.Budget{USD: 1, Period: "total"}, ProjectBudget: &auth.Budget{USD: 2, Period: "week"}}
	x.adm.on, x.adm.tag = true, "tag"
	x.adm.customer = &auth.Customer{ID: "cus1", ExternalID: "c", DailyUSD: &day, MonthlyUSD: &month}
	x.estimate = func() int { return 10 }
	d := &provider.Deployment{Provider: "up", Model: "m"}
	g := route.NewGroup("m", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{})
	adm := x.admission(g, true)
	if adm == nil {
		t.Fatal("no admission")
	}
	var rates, budgets []string
	for _, r := range adm.Rates {
		rates = append(rates, string(r.Scope)+":"+r.ID)
	}
	for _, b := range adm.Budgets {
		budgets = append(budgets, string(b.Scope)+":"+b.ID+":"+string(b.Period))
	}
	wantRates := []string{string(limit.ScopeKey) + ":key1", string(limit.ScopeKeyModel) + ":" + limit.KeyModelID("key1", "m"),
		string(limit.ScopeProject) + ":proj1"}
	wantBudgets := []string{string(limit.ScopeKey) + ":key1:" + string(limit.Total), string(limit.ScopeProject) + ":proj1:" + string(limit.Week),
		string(limit.ScopeCustomer) + ":cus1:" + string(limit.Day), string(limit.ScopeCustomer) + ":cus1:" + string(limit.Month)}
	if !slices.Equal(rates, wantRates) || !slices.Equal(budgets, wantBudgets) {
		t.Errorf("rates %q, budgets %q; want %q, %q", rates, budgets, wantRates, wantBudgets)
	}
}
