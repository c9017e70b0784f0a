package server

import (
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// templateExchange is an exchange ready for admission (x.admission) of
// the requests of p, with customer c.
func templateExchange(t *testing.T, p *auth.Principal, c *auth.Customer) *exchange {
	t.Helper()
	s, _ := newTestServer(t)
	_, prices := embeddedLimits(t)
	rt := *s.Runtime()
	rt.Limits = &Limits{Prices: prices}
	x := &exchange{s: s, rt: &rt, r: httptest.NewRequest("POST", "/v1/chat/completions", nil)}
	x.principal = p
	x.adm.on, x.adm.tag, x.adm.customer = true, PrincipalTag(p), c
	x.estimate = func() int { return 10 }
	return x
}

// admissionView is what an Admission lists, its slices copied.
type admissionView struct {
	Tag     string
	Rates   []limit.Rate
	Budgets []limit.Budget
	Tokens  int64
	Cost    limit.Micros
}

// admissionOf admits p's request for group g through a fresh exchange
// and returns what its Admission listed, and whether its rates and
// budgets were those of the template in p's Memo, uncopied.
func admissionOf(t *testing.T, p *auth.Principal, c *auth.Customer, g *route.Group, customer bool) (admissionView, bool) {
	t.Helper()
	x := templateExchange(t, p, c)
	adm := x.admission(g, customer)
	if adm == nil {
		t.Fatal("no admission")
	}
	v := admissionView{adm.Tag, append([]limit.Rate(nil), adm.Rates...), append([]limit.Budget(nil), adm.Budgets...), adm.Tokens, adm.Cost}
	tm := p.LimitMemo.Template()
	listed := tm != nil && len(adm.Rates)+len(adm.Budgets) > 0 &&
		sameSlice(adm.Rates, tm.Rates()) && sameSlice(adm.Budgets, tm.Budgets())
	return v, listed
}

// sameSlice reports whether a and b are one slice: same length, same
// first element (if any).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// built is p's admission as built from its fields, with no template.
func built(t *testing.T, p *auth.Principal, c *auth.Customer, g *route.Group, customer bool) admissionView {
	t.Helper()
	q := *p
	q.LimitMemo = nil
	v, _ := admissionOf(t, &q, c, g, customer)
	return v
}

// TestAdmissionTemplate: the admissions of a principal with a Memo,
// made from the template kept there, list what admissions built from
// its fields list, for every shape (key and project rates and budgets,
// a rate per model, customer budgets, a downgrade's admission without
// them); those with neither a model rate nor customer budgets list the
// template's own slices.
func TestAdmissionTemplate(t *testing.T) {
	day, month := 1.5, 20.0
	customers := []*auth.Customer{nil,
		{ID: "cus1", ExternalID: "c1", DailyUSD: &day},
		{ID: "cus2", ExternalID: "c2", Name: "Acme", DailyUSD: &day, MonthlyUSD: &month},
		{ID: "cus3", ExternalID: "c3"}, // no budgets
	}
	principals := []auth.Principal{
		{KeyID: "key1", Name: "bot", Project: "bench", RPM: 10, TPM: 1000, Budget: &auth.Budget{USD: 1, Period: "total"}},
		{KeyID: "key2", Project: "p", ProjectID: "proj1", ProjectLimits: auth.Limits{RPM: 100}, ProjectBudget: &auth.Budget{USD: 2, Period: "week"},
			ModelLimits: map[string]auth.Limits{"m": {RPM: 5}, "zero": {}}},
		{KeyID: "key3", Name: "both", ProjectID: "proj2", RPM: 3, ProjectLimits: auth.Limits{TPM: 50},
			Budget: &auth.Budget{USD: 3, Period: "day"}, ProjectBudget: &auth.Budget{USD: 4, Period: "bogus"},
			ModelLimits: map[string]auth.Limits{"m": {TPM: 7}}},
		{KeyID: "key4"}, // no limits of its own
	}
	d := &provider.Deployment{Provider: "up", Model: "m"}
	groups := []*route.Group{
		route.NewGroup("m", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{}),
		route.NewGroup("zero", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{}),
		route.NewGroup("other", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{}),
	}
	for i := range principals {
		p := &principals[i]
		p.LimitMemo = new(limit.Memo)
		for _, c := range customers {
			for _, g := range groups {
				for _, customer := range []bool{true, false} {
					want := built(t, p, c, g, customer)
					for range 2 { // the first makes the template, the second finds it
						got, listed := admissionOf(t, p, c, g, customer)
						if diff := cmp.Diff(want, got); diff != "" {
							t.Fatalf("%s, customer %v, group %s, customer budgets %v (-built +from template):\n%s", p.KeyID, c, g.Name, customer, diff)
						}
						plain := g.Name != "m" || p.ModelLimits == nil
						noCustomer := !customer || c == nil || (c.DailyUSD == nil && c.MonthlyUSD == nil)
						if wantListed := plain && noCustomer && len(got.Rates)+len(got.Budgets) > 0; listed != wantListed {
							t.Errorf("%s, group %s, customer %v: listed the template's slices %v, want %v", p.KeyID, g.Name, c, listed, wantListed)
						}
					}
				}
			}
		}
	}
}

// TestAdmissionTemplateFollowsPrincipal: a template applies only to the
// values it was made from. A principal copied and changed, which shares
// the original's Memo (and template), is admitted with its own values,
// and the original with its own still; a principal made anew (a reload)
// with its own Memo gets a template of its own.
func TestAdmissionTemplateFollowsPrincipal(t *testing.T) {
	orig := &auth.Principal{KeyID: "key1", Name: "bot", Project: "bench", RPM: 10, TPM: 1000,
		Budget: &auth.Budget{USD: 1, Period: "total"}, ProjectBudget: &auth.Budget{USD: 5, Period: "month"}, LimitMemo: new(limit.Memo)}
	g := route.NewGroup("m", route.Failover, []*provider.Deployment{{Provider: "up", Model: "m"}}, nil, provider.Timeouts{})
	admit := func(p *auth.Principal) admissionView {
		t.Helper()
		v, _ := admissionOf(t, p, nil, g, true)
		if want := built(t, p, nil, g, true); !cmp.Equal(want, v) {
			t.Fatalf("%+v: admitted with %+v, want %+v", p, v, want)
		}
		return v
	}
	first := admit(orig)
	if orig.LimitMemo.Template() == nil {
		t.Fatal("no template kept")
	}
	changes := map[string]func(p *auth.Principal){
		"rpm":             func(p *auth.Principal) { p.RPM = 20 },
		"tpm":             func(p *auth.Principal) { p.TPM = 0 },
		"budget":          func(p *auth.Principal) { p.Budget = &auth.Budget{USD: 2, Period: "total"} },
		"budget period":   func(p *auth.Principal) { p.Budget = &auth.Budget{USD: 1, Period: "month"} },
		"no budget":       func(p *auth.Principal) { p.Budget = nil },
		"renamed key":     func(p *auth.Principal) { p.Name = "bot2" },
		"renamed project": func(p *auth.Principal) { p.Project = "bench2"; p.StaticTag = "" },
		"project id":      func(p *auth.Principal) { p.ProjectID = "proj9" },
		"project rate":    func(p *auth.Principal) { p.ProjectLimits = auth.Limits{RPM: 7} },
		"project budget":  func(p *auth.Principal) { p.ProjectBudget = &auth.Budget{USD: 9, Period: "day"} },
		"key id":          func(p *auth.Principal) { p.KeyID = "key2" },
		// Names of the same length: told apart by their contents.
		"same-length key name":     func(p *auth.Principal) { p.Name = "bat" },
		"same-length project name": func(p *auth.Principal) { p.Project = "bunch"; p.StaticTag = "" },
		"same-length key id":       func(p *auth.Principal) { p.KeyID = "kez1" },
		"rate for a model":         func(p *auth.Principal) { p.ModelLimits = map[string]auth.Limits{"m": {RPM: 1}} },
	}
	for name, change := range changes {
		q := *orig // shares orig's Memo
		change(&q)
		if got := admit(&q); cmp.Equal(got, first) {
			t.Errorf("%s: admitted as before the change: %+v", name, got)
		}
		if got := admit(orig); !cmp.Equal(got, first) {
			t.Errorf("after %s: the original admitted with %+v, want %+v", name, got, first)
		}
	}
	// A project with an ID renamed to a name of the same length: only
	// the name's contents tell the template is not its own.
	withID := *orig
	withID.ProjectID, withID.LimitMemo = "proj1", new(limit.Memo)
	before := admit(&withID)
	renamed := withID
	renamed.Project = "bunch"
	if got := admit(&renamed); cmp.Equal(got, before) {
		t.Errorf("a project with an ID renamed: admitted as before: %+v", got)
	}
	// Counted under another tag (the ID of a project known by name
	// only), the project's budget is that tag's.
	x := templateExchange(t, orig, nil)
	x.adm.tag = "elsewhere"
	if adm := x.admission(g, true); len(adm.Budgets) != 2 || adm.Budgets[1].ID != "elsewhere" {
		t.Errorf("under another tag: budgets %+v, want the project's under ID elsewhere", adm.Budgets)
	}
	// A reload: a new principal, with its own Memo.
	reloaded := *orig
	reloaded.RPM, reloaded.LimitMemo = 30, new(limit.Memo)
	if got := admit(&reloaded); got.Rates[0].RPM != 30 {
		t.Errorf("reloaded key admitted with rpm %d, want 30", got.Rates[0].RPM)
	}
	if reloaded.LimitMemo.Template() == orig.LimitMemo.Template() {
		t.Error("the reloaded principal uses the old one's template")
	}
}

// TestAdmissionFieldsAllSet: admissionFrom sets the Admission's fields
// one by one (not by a literal, which is built aside and copied), so a
// field added to limit.Admission must be set there too, or a request
// would inherit the one before it in a reused exchange.
func TestAdmissionFieldsAllSet(t *testing.T) {
	set := []string{"Tag", "Rates", "Budgets", "Tokens", "Cost", "Memo"}
	typ := reflect.TypeFor[limit.Admission]()
	var fields []string
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if !slices.Equal(fields, set) {
		t.Errorf("limit.Admission has fields %v; admissionFrom sets %v", fields, set)
	}
}
