package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/limit"
)

// The admission script leaves to Go the arithmetic that needs no counter
// (rateIncrement, rateRemaining); Lua did it in doubles before, and
// rounding at large limits is part of how buckets move. The Go figures
// must be the ones Lua's doubles give, at every size.
func TestRateArithmeticMatchesLua(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	// The formulas as the script had them, run by Redis's own Lua.
	const lua = `
local cost, limit, used, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local rem = 0
if used < window then rem = math.floor((window - used) * limit / window) end
return {string.format('%.17g', math.floor(cost * window / limit)), string.format('%d', rem)}`
	costs := []int64{0, 1, 7, 500, 4095, 123_457, 1e6, 33_554_433, 1e9, 1e13, 1<<62 + 1}
	limits := []int64{1, 3, 7, 60, 100, 999_983, 1e8, 1e9, 1e12, 1<<40 + 1, 1 << 52, 1<<53 - 1, 1e18}
	used := []int64{0, 1, 17, window / 3, window - 1, window, window + 5}
	for _, cost := range costs {
		for _, lim := range limits {
			for _, u := range used {
				args := []string{strconv.FormatInt(cost, 10), strconv.FormatInt(lim, 10), strconv.FormatInt(u, 10), strconv.FormatInt(window, 10)}
				out, err := c.Do(ctx, c.B().Eval().Script(lua).Numkeys(0).Arg(args...).Build()).AsStrSlice()
				if err != nil {
					t.Fatal(err)
				}
				// Compared as the doubles Lua reads them as.
				inc, _ := strconv.ParseFloat(out[0], 64)
				got := rateIncrement(cost, lim)
				if g, err := strconv.ParseFloat(got, 64); err != nil || g != inc {
					t.Errorf("increment of %d under %d: Go %s, Lua %s", cost, lim, got, out[0])
				}
				if got := strconv.FormatInt(rateRemaining(u, lim), 10); got != out[1] {
					t.Errorf("remaining under %d, %d µs used: Go %s, Lua %s", lim, u, got, out[1])
				}
			}
		}
	}
}

// A budget counter's expiry is set when an admission creates it, and a
// later admission or settle leaves it as it is; the reply's spend after
// an admission is INCRBY's, exact near 2^53; a rate bucket's arrival
// time at today's microseconds (about 1.8e15) is stored and reported
// exactly.
func TestAdmitCountersExact(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	at := time.Date(2027, 1, 15, 12, 0, 0, 123_456_000, time.UTC)
	clk := newClock(at)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SettleDelay: -1})
	month := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: 1<<53 - 1, Period: limit.Month}
	total := limit.Budget{Scope: limit.ScopeProject, ID: "p", Limit: 1<<53 - 1, Period: limit.Total}
	a := limit.Admission{Tag: "x", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", TPM: 7}}, Tokens: 3,
		Budgets: []limit.Budget{month, total}, Cost: 9}
	start, end := limit.Month.Span(at)
	mkey := l.budgetKey("x", &month, start)
	tstart, _ := limit.Total.Span(at)
	tkey := l.budgetKey("x", &total, tstart)
	pexpiretime := func(k string) int64 {
		t.Helper()
		v, err := c.Do(ctx, c.B().Pexpiretime().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatalf("first admission: %v %+v", err, d.Refused)
	}
	if got, want := pexpiretime(mkey), end.Add(budgetGrace).UnixMilli(); got != want {
		t.Errorf("month counter created with expiry %d, want %d", got, want)
	}
	if got := pexpiretime(tkey); got != -1 {
		t.Errorf("total counter created with expiry %d, want none", got)
	}
	inc := int64(3 * window / 7) // 25,714,285 µs
	v, err := c.Do(ctx, c.B().Get().Key(l.rateKey("x", "rt", limit.ScopeKey, "k")).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(at.UnixMicro()+inc, 10); v != want {
		t.Errorf("token bucket holds %s, want %s", v, want)
	}
	if d.Tokens.Reset != time.Duration(inc)*time.Microsecond || d.Tokens.Remaining != rateRemaining(inc, 7) || d.Tokens.Remaining != 4 {
		t.Errorf("tokens quota %+v, want reset %d µs, remaining 4", d.Tokens, inc)
	}

	// An expiry changed behind the script's back stays: only creation
	// sets it (the key names its period, so it never needs setting again).
	moved := end.Add(budgetGrace + time.Hour).UnixMilli()
	if err := c.Do(ctx, c.B().Pexpireat().Key(mkey).MillisecondsTimestamp(moved).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// Near 2^53: 2^53 − 10 spent; 9 more reach the limit 2^53 − 1 exactly.
	for _, k := range []string{mkey, tkey} {
		if err := c.Do(ctx, c.B().Set().Key(k).Value(strconv.FormatInt(1<<53-10, 10)).Keepttl().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	d, err = l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatalf("admission near 2^53: %v %+v", err, d.Refused)
	}
	if d.BudgetLeft != 0 {
		t.Errorf("left %d after the admission near 2^53, want 0", d.BudgetLeft)
	}
	if got := pexpiretime(mkey); got != moved {
		t.Errorf("admission changed an existing counter's expiry to %d, want %d kept", got, moved)
	}
	if err := l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 3, Cost: 9}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	d, err = l.Admit(ctx, a)
	if err != nil || d.Allowed || d.Refused.Kind != limit.KindBudget || d.Refused.ID != "k" {
		t.Fatalf("admission past the limit: %v allowed %v %+v", err, d.Allowed, d.Refused)
	}
	if d.BudgetLeft != 0 {
		t.Errorf("left %d when refused, want 0", d.BudgetLeft)
	}
	for _, k := range []string{mkey, tkey} {
		got, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.FormatInt(1<<53-1, 10); got != want {
			t.Errorf("%s holds %s, want %s", k, got, want)
		}
	}
	if got := pexpiretime(mkey); got != moved {
		t.Errorf("expiry %d after a settle and a refusal, want %d kept", got, moved)
	}
}
