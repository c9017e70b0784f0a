package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
)

// spendView is the spend object of the admin API.
type spendView struct {
	USD          string     `json:"usd"`
	PeriodStart  *time.Time `json:"period_start"`
	ResetsAt     *time.Time `json:"resets_at"`
	RemainingUSD string     `json:"remaining_usd"`
}

// budgeted is the part of a key, project or customer the spend tests read.
type budgeted struct {
	ID           string     `json:"id"`
	Spend        *spendView `json:"spend"`
	DailySpend   *spendView `json:"daily_spend"`
	MonthlySpend *spendView `json:"monthly_spend"`
}

// spendRequests sends n chat requests of model through the gateways in
// turn and returns the sum of their x-gatehouse-cost-usd headers and how
// many were refused for a budget.
func spendRequests(t *testing.T, bases []string, key, model string, n int, opts ...option.RequestOption) (sum limit.Micros, refused int) {
	t.Helper()
	for i := range n {
		o := chatOnce(context.Background(), burstClient(bases[i%len(bases)], key), model, opts...)
		switch {
		case o.status == 200:
		case o.status == 429 && o.code == "budget_exceeded":
			refused++
		default:
			t.Fatalf("request %d: status %d %s", i, o.status, o.msg)
		}
		if c := o.header.Get("X-Gatehouse-Cost-Usd"); c != "" {
			sum += mustUSD(t, c)
		}
	}
	return sum, refused
}

// waitSpend polls an admin record until its spend (the field pick
// chooses) shows usd, the requests' settlements having landed.
func waitSpend(t *testing.T, base, path string, pick func(*budgeted) *spendView, usd limit.Micros) *spendView {
	t.Helper()
	var got *spendView
	deadline := time.Now().Add(5 * time.Second)
	for {
		var b budgeted
		adminJSON(t, base, path, &b)
		if got = pick(&b); got != nil && got.USD == usd.String() {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s on %s: spend %+v, want usd %s (the sum of the cost headers)", path, base, got, usd)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func keySpendOf(b *budgeted) *spendView { return b.Spend }

// wantPeriod checks a spend's period bounds against p at now.
func wantPeriod(t *testing.T, what string, s *spendView, p limit.Period, now time.Time, budget limit.Micros) {
	t.Helper()
	start, end := p.Span(now)
	var gotStart, gotEnd string
	if s.PeriodStart != nil {
		gotStart = s.PeriodStart.Format(time.DateOnly)
		if !s.PeriodStart.Equal(mustDate(t, start)) {
			t.Errorf("%s: period_start %v, want %s 00:00 UTC", what, s.PeriodStart, start)
		}
	}
	if s.ResetsAt != nil {
		gotEnd = s.ResetsAt.Format(time.RFC3339)
	}
	wantEnd := ""
	if !end.IsZero() {
		wantEnd = end.Format(time.RFC3339)
	}
	if gotStart != start || gotEnd != wantEnd {
		t.Errorf("%s: period %q to %q, want %q to %q", what, gotStart, gotEnd, start, wantEnd)
	}
	left := budget - mustUSD(t, s.USD)
	if left < 0 {
		left = 0
	}
	if s.RemainingUSD != left.String() {
		t.Errorf("%s: remaining_usd %s, want %s", what, s.RemainingUSD, left)
	}
}

func mustDate(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// spendKeysConfig is a config key with a budget of its own.
const spendKeysConfig = "  - {key: gh-spend-fixed, name: fixed, project: qa, budget: {usd: 0.025, period: total}}\n"

// checkSpend runs the spend scenario on gateways sharing their limits
// (one, or replicas of one cluster): a stored key with a daily budget
// that runs out, in a project with a monthly budget, for a customer with
// both; and a config key. After the requests, every record shows as its
// spend the sum of the cost headers its requests got, read through any
// of the gateways.
func checkSpend(t *testing.T, bases []string) {
	a := bases[0]
	adminPost(t, a, "/admin/projects", `{"name":"shop","budget":{"usd":1,"period":"month"}}`)
	key := adminPost(t, a, "/admin/keys", `{"project":"shop","name":"app","budget":{"usd":0.05,"period":"day"}}`)
	cus := adminPost(t, a, "/admin/customers", `{"project":"shop","external_id":"ann","daily_usd":0.5,"monthly_usd":2}`)
	secret, keyID, cusID := key["key"].(string), key["id"].(string), cus["id"].(string)

	ann := option.WithHeader("X-Gatehouse-Customer", "ann")
	cheap, _ := spendRequests(t, bases, secret, "cheap", 3, ann)
	chat, refused := spendRequests(t, bases, secret, "chat", 8, ann)
	sum := cheap + chat
	if refused == 0 || chat == 0 {
		t.Fatalf("chat requests cost %s with %d refused: want the key's $0.05 a day to run out", chat, refused)
	}
	fixed, fixedRefused := spendRequests(t, bases, "gh-spend-fixed", "chat", 4)
	if fixed != limit.USD(0.02) || fixedRefused != 2 {
		t.Fatalf("config key: cost %s, %d refused; want 0.020000 and 2 refused under its $0.025", fixed, fixedRefused)
	}

	now := time.Now()
	for _, base := range bases {
		s := waitSpend(t, base, "/admin/keys/"+keyID, keySpendOf, sum)
		wantPeriod(t, "key", s, limit.Day, now, limit.USD(0.05))
		s = waitSpend(t, base, "/admin/projects/shop", keySpendOf, sum)
		wantPeriod(t, "project", s, limit.Month, now, limit.USD(1))
		s = waitSpend(t, base, "/admin/customers/"+cusID, func(b *budgeted) *spendView { return b.DailySpend }, sum)
		wantPeriod(t, "customer's day", s, limit.Day, now, limit.USD(0.5))
		s = waitSpend(t, base, "/admin/customers/"+cusID, func(b *budgeted) *spendView { return b.MonthlySpend }, sum)
		wantPeriod(t, "customer's month", s, limit.Month, now, limit.USD(2))
		s = waitSpend(t, base, "/admin/keys/static:fixed", keySpendOf, fixed)
		wantPeriod(t, "config key", s, limit.Total, now, limit.USD(0.025))

		var list struct{ Data []budgeted }
		adminJSON(t, base, "/admin/keys", &list)
		got := map[string]string{}
		for _, k := range list.Data {
			got[k.ID] = "none"
			if k.Spend != nil {
				got[k.ID] = k.Spend.USD
			}
		}
		want := fmt.Sprint(map[string]string{keyID: sum.String(), "static:fixed": fixed.String(), "static:tester": "none"})
		if fmt.Sprint(got) != want {
			t.Errorf("%s: listed keys' spend %v, want %s", base, got, want)
		}
	}
}

// TestAdminSpendEmbedded: one gateway, its counters in process.
func TestAdminSpendEmbedded(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, spendKeysConfig+"  - {key: "+clientKey+", name: tester, project: qa}\n",
		"admin_key: "+testAdminKey+"\n"))
	checkSpend(t, []string{gw.URL})
}

// TestAdminSpendAcrossReplicas: two gateways on one Redis and
// PostgreSQL, requests spread over both; each one's admin API shows the
// spend of both, exactly.
func TestAdminSpendAcrossReplicas(t *testing.T) {
	pg, rd := clusterDSN(t)
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	cfg := limitsConfig(up, spendKeysConfig+"  - {key: "+clientKey+", name: tester, project: qa}\n",
		"admin_key: "+testAdminKey+"\n"+
			fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\nlimits: {redis_prefix: '%s', redis_timeout: 10s}\n", rd, pg, uniquePrefix()))
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	checkSpend(t, []string{a.URL, b.URL})
}
