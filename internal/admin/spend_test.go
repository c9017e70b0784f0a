package admin

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
)

// spendNow is the handler's and the limiter's clock in the spend tests: mid
// November, a Sunday.
var spendNow = time.Date(2026, 11, 15, 10, 30, 0, 0, time.UTC)

// limiterBudgets answers Budgets from a real in-process limiter, as
// cmd/gatehouse does in embedded mode, and records each call.
type limiterBudgets struct {
	e    *limit.Embedded
	fail error

	mu    sync.Mutex
	calls [][]BudgetRef
}

func (b *limiterBudgets) Spent(_ context.Context, refs []BudgetRef, t time.Time) ([]limit.Micros, error) {
	b.mu.Lock()
	b.calls = append(b.calls, refs)
	b.mu.Unlock()
	if b.fail != nil {
		return nil, b.fail
	}
	out := make([]limit.Micros, len(refs))
	for i, r := range refs {
		out[i] = b.e.Spent(r.Scope, r.ID, r.Period, t)
	}
	return out, nil
}

func (b *limiterBudgets) takeCalls() [][]BudgetRef {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = nil
	return c
}

// newSpendEnv is newEnv with Budgets over a fresh limiter, the clock at
// spendNow, and a static key with a weekly budget.
func newSpendEnv(t *testing.T) (*env, *limiterBudgets) {
	t.Helper()
	st := openSQLite(t)
	ids, err := EnsureProjects(context.Background(), st, []string{"config-proj"})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limit.NewEmbedded(context.Background(), limit.Options{Now: func() time.Time { return spendNow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close(context.Background()) })
	b := &limiterBudgets{e: lim}
	static := []auth.Key{
		{ID: "static:cfg", Name: "cfg", ProjectID: ids["config-proj"], Budget: &auth.Budget{USD: 2, Period: "week"}},
		{ID: "static:free", Name: "free", ProjectID: ids["config-proj"]},
	}
	e := &env{t: t, st: st, vars: map[string]string{"cfgproj": ids["config-proj"]}, logs: &bytes.Buffer{}, spec: loadSpec(t)}
	h := New(Options{Store: st, AdminKey: auth.HashKey(adminKey), Static: static, Budgets: b,
		Log: slog.New(slog.NewTextHandler(e.logs, nil)), Now: func() time.Time { return spendNow }})
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e, b
}

// spend admits a request reserving reserve on one budget of the limiter
// and, unless settle is negative, settles it at settle, as a request
// served through the gateway does.
func spend(t *testing.T, b *limiterBudgets, scope limit.Scope, id string, p limit.Period, reserve, settle limit.Micros) {
	t.Helper()
	ctx := context.Background()
	d, err := b.e.Admit(ctx, limit.Admission{Tag: "t", Cost: reserve,
		Budgets: []limit.Budget{{Scope: scope, ID: id, Limit: limit.USD(1e6), Period: p}}})
	if err != nil || !d.Allowed {
		t.Fatalf("admit: %+v %v", d, err)
	}
	if settle >= 0 {
		if err := b.e.Settle(ctx, d.Reservation, limit.Actual{Cost: settle}); err != nil {
			t.Fatal(err)
		}
	}
}

// spendOf decodes the spend object in field of body; nil when absent.
func spendOf(t *testing.T, body map[string]any, field string) map[string]any {
	t.Helper()
	v, ok := body[field]
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object: %v", field, v, body)
	}
	return m
}

func wantSpend(t *testing.T, what string, body map[string]any, field string, want map[string]any) {
	t.Helper()
	if diff := cmp.Diff(want, spendOf(t, body, field)); diff != "" {
		t.Errorf("%s: %s (-want +got):\n%s", what, field, diff)
	}
}

// TestSpendShowsTheLimitersCounter: after requests settle (and while one
// is in flight), every record with a budget shows what the limiter
// counts on it, with the bounds of its period; records without a budget
// show no spend.
func TestSpendShowsTheLimitersCounter(t *testing.T) {
	e, b := newSpendEnv(t)
	e.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"acme","budget":{"usd":50,"period":"month"}}`, status: 201,
			save: map[string]string{"p": "id"}, check: func(t *testing.T, body map[string]any) {
				wantSpend(t, "new project", body, "spend", map[string]any{"usd": "0.000000", "remaining_usd": "50.000000",
					"period_start": "2026-11-01T00:00:00Z", "resets_at": "2026-12-01T00:00:00Z"})
			}},
		{name: "key", method: "POST", path: "/admin/keys", body: `{"project":"acme","budget":{"usd":1.5,"period":"total"}}`, status: 201,
			save: map[string]string{"k": "id"}},
		{name: "key without budget", method: "POST", path: "/admin/keys", body: `{"project":"acme"}`, status: 201,
			save: map[string]string{"k0": "id"}, wantFieldNone: "spend"},
		{name: "customer", method: "POST", path: "/admin/customers", body: `{"project":"acme","external_id":"ann","daily_usd":1,"monthly_usd":20}`, status: 201,
			save: map[string]string{"c": "id"}},
		{name: "customer without budget", method: "POST", path: "/admin/customers", body: `{"project":"acme","external_id":"bob"}`, status: 201,
			save: map[string]string{"c0": "id"}, wantFieldNone: "daily_spend"},
	})
	if t.Failed() {
		t.FailNow()
	}
	spend(t, b, limit.ScopeProject, e.vars["p"], limit.Month, limit.USD(20), limit.USD(12.345678))
	spend(t, b, limit.ScopeProject, e.vars["p"], limit.Month, limit.USD(0.5), -1)       // in flight
	spend(t, b, limit.ScopeProject, e.vars["p"], limit.Day, limit.USD(7), limit.USD(7)) // another period's counter
	spend(t, b, limit.ScopeKey, e.vars["k"], limit.Total, limit.USD(0.1), limit.USD(2)) // settled above its reservation and its budget
	spend(t, b, limit.ScopeCustomer, e.vars["c"], limit.Day, limit.USD(0.3), limit.USD(0.25))
	spend(t, b, limit.ScopeCustomer, e.vars["c"], limit.Month, limit.USD(0.3), limit.USD(0.25))
	spend(t, b, limit.ScopeKey, "static:cfg", limit.Week, limit.USD(0.125), limit.USD(0.125))

	project := map[string]any{"usd": "12.845678", "remaining_usd": "37.154322",
		"period_start": "2026-11-01T00:00:00Z", "resets_at": "2026-12-01T00:00:00Z"}
	key := map[string]any{"usd": "2.000000", "remaining_usd": "0.000000"}
	static := map[string]any{"usd": "0.125000", "remaining_usd": "1.875000",
		"period_start": "2026-11-09T00:00:00Z", "resets_at": "2026-11-16T00:00:00Z"}
	day := map[string]any{"usd": "0.250000", "remaining_usd": "0.750000",
		"period_start": "2026-11-15T00:00:00Z", "resets_at": "2026-11-16T00:00:00Z"}
	month := map[string]any{"usd": "0.250000", "remaining_usd": "19.750000",
		"period_start": "2026-11-01T00:00:00Z", "resets_at": "2026-12-01T00:00:00Z"}
	e.run([]step{
		{name: "get project", method: "GET", path: "/admin/projects/{p}", status: 200,
			check: func(t *testing.T, body map[string]any) { wantSpend(t, "project", body, "spend", project) }},
		{name: "get key", method: "GET", path: "/admin/keys/{k}", status: 200,
			check: func(t *testing.T, body map[string]any) { wantSpend(t, "total key over budget", body, "spend", key) }},
		{name: "get static key", method: "GET", path: "/admin/keys/static:cfg", status: 200,
			check: func(t *testing.T, body map[string]any) { wantSpend(t, "static key", body, "spend", static) }},
		{name: "get key without budget", method: "GET", path: "/admin/keys/{k0}", status: 200, wantFieldNone: "spend"},
		{name: "get customer", method: "GET", path: "/admin/customers/{c}", status: 200, check: func(t *testing.T, body map[string]any) {
			wantSpend(t, "customer", body, "daily_spend", day)
			wantSpend(t, "customer", body, "monthly_spend", month)
		}},
		{name: "get customer without budget", method: "GET", path: "/admin/customers/{c0}", status: 200, wantFieldNone: "monthly_spend"},
		{name: "patch project keeps showing spend", method: "PATCH", path: "/admin/projects/{p}", body: `{"rpm":5}`, status: 200,
			check: func(t *testing.T, body map[string]any) { wantSpend(t, "patched project", body, "spend", project) }},
		{name: "a budget made daily reads the day's counter", method: "PATCH", path: "/admin/projects/{p}", body: `{"budget":{"usd":50,"period":"day"}}`, status: 200,
			check: func(t *testing.T, body map[string]any) {
				wantSpend(t, "daily project", body, "spend", map[string]any{"usd": "7.000000", "remaining_usd": "43.000000",
					"period_start": "2026-11-15T00:00:00Z", "resets_at": "2026-11-16T00:00:00Z"})
			}},
		{name: "patch customer drops the daily budget", method: "PATCH", path: "/admin/customers/{c}", body: `{"daily_usd":null}`, status: 200,
			wantFieldNone: "daily_spend", check: func(t *testing.T, body map[string]any) { wantSpend(t, "customer", body, "monthly_spend", month) }},
		{name: "revoked key still shows its spend", method: "DELETE", path: "/admin/keys/{k}", status: 200,
			check: func(t *testing.T, body map[string]any) { wantSpend(t, "revoked key", body, "spend", key) }},
		{name: "list keys", method: "GET", path: "/admin/keys", status: 200, check: func(t *testing.T, body map[string]any) {
			got := map[string]map[string]any{}
			for _, d := range body["data"].([]any) {
				k := d.(map[string]any)
				got[k["id"].(string)] = spendOf(t, k, "spend")
			}
			want := map[string]map[string]any{e.vars["k"]: key, e.vars["k0"]: nil, "static:cfg": static, "static:free": nil}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("listed keys' spend (-want +got):\n%s", diff)
			}
		}},
	})
}

// TestSpendListsOneLookupPerPage: a list asks Budgets once for its whole
// page, naming each listed record's budgets and nothing else: not the
// record fetched past the page to see whether there are more, nor a
// record without a budget.
func TestSpendListsOneLookupPerPage(t *testing.T) {
	e, b := newSpendEnv(t)
	e.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"acme","budget":{"usd":5,"period":"day"}}`, status: 201, save: map[string]string{"p": "id"}},
		{name: "k1", method: "POST", path: "/admin/keys", body: `{"project":"acme","budget":{"usd":1,"period":"month"}}`, status: 201, save: map[string]string{"k1": "id"}},
		{name: "k2", method: "POST", path: "/admin/keys", body: `{"project":"acme"}`, status: 201, save: map[string]string{"k2": "id"}},
		{name: "k3", method: "POST", path: "/admin/keys", body: `{"project":"acme","budget":{"usd":1,"period":"week"}}`, status: 201, save: map[string]string{"k3": "id"}},
		{name: "c1", method: "POST", path: "/admin/customers", body: `{"project":"acme","external_id":"a","daily_usd":1,"monthly_usd":2}`, status: 201, save: map[string]string{"c1": "id"}},
		{name: "c2", method: "POST", path: "/admin/customers", body: `{"project":"acme","external_id":"b","monthly_usd":2}`, status: 201, save: map[string]string{"c2": "id"}},
	})
	b.takeCalls()
	p := e.vars["p"]
	for _, c := range []struct {
		path string
		want [][]BudgetRef
	}{
		{"/admin/keys?project=acme&limit=2", [][]BudgetRef{{{Scope: limit.ScopeKey, ID: e.vars["k1"], ProjectID: p, Period: limit.Month}}}},
		{"/admin/keys?limit=10", [][]BudgetRef{{
			{Scope: limit.ScopeKey, ID: e.vars["k1"], ProjectID: p, Period: limit.Month},
			{Scope: limit.ScopeKey, ID: e.vars["k3"], ProjectID: p, Period: limit.Week},
			{Scope: limit.ScopeKey, ID: "static:cfg", ProjectID: e.vars["cfgproj"], Period: limit.Week},
		}}},
		{"/admin/projects", [][]BudgetRef{{{Scope: limit.ScopeProject, ID: p, ProjectID: p, Period: limit.Day}}}},
		{"/admin/customers", [][]BudgetRef{{
			{Scope: limit.ScopeCustomer, ID: e.vars["c1"], ProjectID: p, Period: limit.Day},
			{Scope: limit.ScopeCustomer, ID: e.vars["c1"], ProjectID: p, Period: limit.Month},
			{Scope: limit.ScopeCustomer, ID: e.vars["c2"], ProjectID: p, Period: limit.Month},
		}}},
		{"/admin/customers?limit=1&after={c1}", [][]BudgetRef{{{Scope: limit.ScopeCustomer, ID: e.vars["c2"], ProjectID: p, Period: limit.Month}}}},
		{"/admin/keys?project=acme&after={k3}", nil}, // an empty page asks nothing
	} {
		if status, body := e.do("GET", c.path, "", "", ""); status != 200 {
			t.Fatalf("GET %s: %d %v", c.path, status, body)
		}
		if diff := cmp.Diff(c.want, b.takeCalls()); diff != "" {
			t.Errorf("GET %s: Budgets calls (-want +got):\n%s", c.path, diff)
		}
	}
}

// TestSpendUnavailable: when the counters cannot be read, records are
// still answered, without spend, and the failure is logged; without
// Budgets there is never a spend field.
func TestSpendUnavailable(t *testing.T) {
	e, b := newSpendEnv(t)
	b.fail = errors.New("redis: dial tcp: connection refused")
	e.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"acme","budget":{"usd":5,"period":"day"}}`, status: 201, wantFieldNone: "spend"},
		{name: "static key", method: "GET", path: "/admin/keys/static:cfg", status: 200, wantFieldNone: "spend"},
		{name: "list", method: "GET", path: "/admin/projects", status: 200, check: func(t *testing.T, body map[string]any) {
			if d := body["data"].([]any); len(d) != 2 || spendOf(t, d[0].(map[string]any), "spend") != nil || spendOf(t, d[1].(map[string]any), "spend") != nil {
				t.Errorf("list: %v", body)
			}
		}},
	})
	if !strings.Contains(e.logs.String(), "connection refused") {
		t.Errorf("failure not logged: %s", e.logs)
	}

	plain := newEnv(t, openSQLite(t))
	plain.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"acme","budget":{"usd":5,"period":"day"}}`, status: 201, wantFieldNone: "spend"},
		{name: "customer", method: "POST", path: "/admin/customers", body: `{"project":"acme","external_id":"a","daily_usd":1}`, status: 201, wantFieldNone: "daily_spend"},
	})
}

// TestNewSpend covers the figures' edges: spend above the budget leaves
// nothing remaining (never a negative), a zero budget has nothing, and a
// week starts on Monday even across a month's end.
func TestNewSpend(t *testing.T) {
	at := time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC) // a Sunday
	ts := func(s string) *time.Time { v, _ := time.Parse(time.RFC3339, s); return &v }
	for _, c := range []struct {
		spent, budget limit.Micros
		p             limit.Period
		want          Spend
	}{
		{limit.USD(3), limit.USD(2), limit.Total, Spend{USD: "3.000000", RemainingUSD: "0.000000"}},
		{0, 0, limit.Day, Spend{USD: "0.000000", RemainingUSD: "0.000000", PeriodStart: ts("2026-03-01T00:00:00Z"), ResetsAt: ts("2026-03-02T00:00:00Z")}},
		{1, limit.USD(1), limit.Week, Spend{USD: "0.000001", RemainingUSD: "0.999999", PeriodStart: ts("2026-02-23T00:00:00Z"), ResetsAt: ts("2026-03-02T00:00:00Z")}},
		{limit.USD(0.5), limit.USD(1), limit.Month, Spend{USD: "0.500000", RemainingUSD: "0.500000", PeriodStart: ts("2026-03-01T00:00:00Z"), ResetsAt: ts("2026-04-01T00:00:00Z")}},
	} {
		if diff := cmp.Diff(&c.want, newSpend(c.spent, c.budget, c.p, at)); diff != "" {
			t.Errorf("newSpend(%v, %v, %s): (-want +got):\n%s", c.spent, c.budget, c.p, diff)
		}
	}
}
