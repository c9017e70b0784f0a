package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
	// Its TTL: a second past its arrival time, which is inc ahead.
	if ttl, err := c.Do(ctx, c.B().Pttl().Key(l.rateKey("x", "rt", limit.ScopeKey, "k")).Build()).AsInt64(); err != nil || ttl > 26_715 || ttl < 26_615 {
		t.Errorf("token bucket's TTL %d ms (%v), want 26715", ttl, err)
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

// admitScriptBefore is admitScript as it was before its cost to Redis was
// cut (a GET per counter, tonumber, every number sent as a float, the
// arithmetic in Lua), kept as the reference the new one must match.
const admitScriptBefore = `local now = tonumber(ARGV[1])
local nr = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local mode = tonumber(ARGV[4])
local extra = 0
if mode == 1 then extra = 2 elseif mode == 2 then extra = 3 end
local nb = #KEYS - nr - extra
if mode == 2 and redis.call('EXISTS', KEYS[#KEYS]) == 0 then return {-1} end
local refused, retry, refusedBudget, refusedLarge = 0, 0, false, false
local tats = {}
local out = {1, 0, 0}
for i = 1, nr do
  local limit = tonumber(ARGV[5 + 2 * i])
  local cost = tonumber(ARGV[6 + 2 * i])
  local v = redis.call('GET', KEYS[i])
  local tat = now
  if v then tat = math.max(tonumber(v), now) end
  local inc = math.floor(cost * window / limit)
  local wait = tat + inc - now - window
  if wait > 0 then
    if refused == 0 or (not refusedLarge and (inc > window or wait > retry)) then
      refused, retry, refusedLarge = i, wait, inc > window
      if refusedLarge then retry = 0 end
    end
    tats[i] = tat
  else
    tats[i] = tat + inc
  end
end
local base = 6 + 2 * nr
for j = 1, nb do
  local limit = tonumber(ARGV[base + 3 * j - 2])
  local cost = tonumber(ARGV[base + 3 * j - 1])
  local used = tonumber(redis.call('GET', KEYS[nr + j]) or '0')
  if used + cost > limit and not refusedBudget then
    refused, retry, refusedBudget = nr + j, 0, true
  end
end
if refused == 0 then
  for i = 1, nr do
    redis.call('SET', KEYS[i], string.format('%d', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000) + 1000)
  end
  local counters = {}
  local cost = 0
  for j = 1, nb do
    cost = tonumber(ARGV[base + 3 * j - 1])
    local exp = tonumber(ARGV[base + 3 * j])
    redis.call('INCRBY', KEYS[nr + j], cost)
    if exp > 0 then redis.call('PEXPIREAT', KEYS[nr + j], exp) end
    counters[#counters + 1] = KEYS[nr + j]
  end
  if mode > 0 then
    redis.call('ZADD', KEYS[nr + nb + 1], tonumber(ARGV[6]), ARGV[5])
    redis.call('HSET', KEYS[nr + nb + 2], ARGV[5], cost .. '\31' .. table.concat(counters, '\31'))
  end
else
  out[1], out[2], out[3] = 0, refused, retry
end
for i = 1, nr do
  local limit = tonumber(ARGV[5 + 2 * i])
  local used = tats[i] - now
  local rem = 0
  if used < window then rem = math.floor((window - used) * limit / window) end
  out[#out + 1] = rem
  out[#out + 1] = used
end
for j = 1, nb do
  out[#out + 1] = tonumber(redis.call('GET', KEYS[nr + j]) or '0')
end
return out
`

// TestAdmitScriptMatchesBefore: on random admissions — up to three rate
// buckets and three budgets, buckets absent, behind or ahead of now,
// requests too large for their limit, counters absent or near their
// limit, with and without a ledger and seeded marker — the admission
// script answers as the script before it did (what a bucket has left
// worked out in Go from the reset it now answers instead) and leaves
// Redis exactly as it did.
func TestAdmitScriptMatchesBefore(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, Options{Prefix: prefix, SweepEvery: -1})
	before := newScript(admitScriptBefore)
	do := redisDo(t, c)
	rateLimits := []int64{1, 3, 60, 100, 7_777, 1e6, 1 << 40}
	tokens := []int64{0, 1, 2, 500, 100_000, 1e9}
	refused := 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 15))
		now := time.Now().UnixMicro()
		nowMs := now / 1000
		nr, nb := r.IntN(4), r.IntN(4)
		if nr+nb == 0 {
			nr = 1
		}
		var setup [][]string
		var keys, newKeys []string // the marker comes before the ledger now
		oldArgs := []string{strconv.FormatInt(now, 10), strconv.Itoa(nr), strconv.FormatInt(window, 10), "0", "", ""}
		newArgs := make([]string, 7)
		copy(newArgs, oldArgs)
		cost := []int64{0, 1, 5_000, 200_000}[r.IntN(4)]
		newArgs[6] = strconv.FormatInt(cost, 10)
		var lims []int64
		for i := range nr {
			k := l.rateKey("a", "rt", limit.ScopeKey, fmt.Sprint("k", i))
			keys = append(keys, k)
			lim, units := rateLimits[r.IntN(len(rateLimits))], tokens[r.IntN(len(tokens))]
			lims = append(lims, lim)
			oldArgs = append(oldArgs, strconv.FormatInt(lim, 10), strconv.FormatInt(units, 10))
			inc := rateMicros(units, lim)
			newArgs = append(newArgs, rateIncrement(units, lim), "0", "0")
			if inc <= float64(window) {
				newArgs[len(newArgs)-2] = strconv.FormatInt(now+int64(inc), 10)
				newArgs[len(newArgs)-1] = strconv.FormatInt(int64(math.Ceil(inc/1000))+1000, 10)
			}
			switch r.IntN(3) {
			case 1:
				setup = append(setup, []string{"SET", k, strconv.FormatInt(now-r.Int64N(window), 10), "PX", "5000"})
			case 2:
				tat := now + r.Int64N(2*window)
				setup = append(setup, []string{"SET", k, strconv.FormatInt(tat, 10), "PX", strconv.FormatInt((tat-now)/1000+1000, 10)})
			}
		}
		for j := range nb {
			b := limit.Budget{Scope: limit.ScopeProject, ID: fmt.Sprint("p", j), Period: limit.Month}
			k := l.budgetKey("a", &b, "2031-01")
			keys = append(keys, k)
			used := r.Int64N(1_000_000)
			lim := used + r.Int64N(400_000) - 200_000
			switch r.IntN(5) {
			case 0:
				lim = 1<<53 - 1
			case 1:
				lim = used + cost // fits exactly
			case 2:
				lim = used + cost - 1 // one micro-dollar short
			}
			exp := int64(0)
			if r.IntN(2) == 0 {
				exp = nowMs + 86_400_000 + r.Int64N(86_400_000)
			}
			oldArgs = append(oldArgs, strconv.FormatInt(lim, 10), strconv.FormatInt(cost, 10), strconv.FormatInt(exp, 10))
			newArgs = append(newArgs, strconv.FormatInt(lim-cost, 10), strconv.FormatInt(exp, 10))
			if r.IntN(3) > 0 {
				set := []string{"SET", k, strconv.FormatInt(used, 10)}
				if exp > 0 {
					set = append(set, "PXAT", strconv.FormatInt(exp, 10))
				}
				setup = append(setup, set)
			}
		}
		if nb > 0 {
			mode := 1 + r.IntN(2)
			id := fmt.Sprint("r", seed)
			oldArgs[3], oldArgs[4], oldArgs[5] = strconv.Itoa(mode), id, strconv.FormatInt(nowMs+900_000, 10)
			copy(newArgs[3:6], oldArgs[3:6])
			newArgs[4] = ledgerMember(id, newArgs[6], keys[nr:])
			newKeys = append(newKeys, keys...)
			keys = append(keys, l.oldLedgerKey("a"), l.ledgerHash("a"))
			setup = append(setup, []string{"ZADD", l.oldLedgerKey("a"), "5", "other"}, []string{"HSET", l.ledgerHash("a"), "other", "1"})
			if mode == 2 {
				keys = append(keys, l.seededKey("a"))
				newKeys = append(newKeys, l.seededKey("a"))
				if r.IntN(5) > 0 {
					setup = append(setup, []string{"SET", l.seededKey("a"), "1"})
				}
			}
			newKeys = append(newKeys, l.ledgerKey("a"))
		} else {
			newKeys = keys
		}
		var replies [2][]int64
		var states [2]map[string]keyState
		for run := range 2 {
			deleteMatching(c, prefix+"*")
			for _, cmd := range setup {
				do(cmd...)
			}
			s, ks, args := &before, keys, oldArgs
			if run == 1 {
				s, ks, args = &l.admit, newKeys, newArgs
			}
			out, err := l.run(ctx, s, ks, args).AsIntSlice()
			if err != nil {
				t.Fatalf("seed %d, run %d: %v", seed, run, err)
			}
			replies[run] = out
			states[run] = snapshot(t, c, prefix)
		}
		// The reply before, in the layout of now: per bucket the reset
		// only, what is left checked against Go's figure.
		was := replies[0]
		if len(was) > 1 {
			if was[0] == 0 {
				refused++
			}
			for i := range nr {
				if left := rateRemaining(was[4+2*i], lims[i]); left != was[3+2*i] {
					t.Errorf("seed %d: bucket %d has %d left, Go makes it %d", seed, i, was[3+2*i], left)
				}
			}
			conv := append([]int64{}, was[:3]...)
			for i := range nr {
				conv = append(conv, was[4+2*i])
			}
			was = append(conv, was[3+2*nr:]...)
		}
		if !slices.Equal(was, replies[1]) {
			t.Errorf("seed %d: answered %v, want %v (before: %v)", seed, replies[1], was, replies[0])
		}
		if len(states[0]) != len(states[1]) {
			t.Errorf("seed %d: %d keys before, %d now", seed, len(states[0]), len(states[1]))
		}
		for k, want := range states[0] {
			got, ok := states[1][k]
			if !ok || got.value != want.value || (got.pttl < 0) != (want.pttl < 0) || got.pttl > want.pttl+100 || got.pttl < want.pttl-100 {
				t.Errorf("seed %d: %s: %+v, want %+v", seed, k, got, want)
			}
		}
	}
	if refused < 30 {
		t.Errorf("only %d of the admissions refused: the cases miss refusals", refused)
	}
}

// redisDo runs one command, its first argument a key, on c, failing the
// test on an error: how the script tests set up and change Redis's state.
func redisDo(t *testing.T, c rueidis.Client) func(cmd ...string) {
	return func(cmd ...string) {
		t.Helper()
		if err := c.Do(context.Background(), c.B().Arbitrary(cmd[0]).Keys(cmd[1]).Args(cmd[2:]...).Build()).Error(); err != nil {
			t.Fatal(cmd, err)
		}
	}
}
