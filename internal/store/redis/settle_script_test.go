package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
)

// settleScriptBefore is settleScript as it was before its cost to Redis
// was cut (one EXISTS and INCRBY per counter, one ZREM and HDEL per
// reservation, the arithmetic in Lua), kept as the reference the new one
// must match in every effect.
const settleScriptBefore = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[3])) then return 0 end
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local nt = tonumber(ARGV[4])
local nr = tonumber(ARGV[5])
local p = 6
for i = 1, nt do
  local k = KEYS[tonumber(ARGV[p])]
  local limit = tonumber(ARGV[p + 1])
  local refund = tonumber(ARGV[p + 2])
  local charge = tonumber(ARGV[p + 3])
  p = p + 4
  local v = redis.call('GET', k)
  local tat
  if v then
    tat = tonumber(v) - math.floor(refund * window / limit)
  end
  if charge > 0 then
    if not tat or tat < now then tat = now end
    tat = tat + math.floor(charge * window / limit)
  end
  if tat then
    if tat <= now then
      redis.call('DEL', k)
    else
      redis.call('SET', k, string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
    end
  end
end
local add = {}
local order = {}
for i = 1, nr do
  local id = ARGV[p + 2]
  local nb = tonumber(ARGV[p + 3])
  local held = redis.call('ZREM', KEYS[tonumber(ARGV[p])], id)
  redis.call('HDEL', KEYS[tonumber(ARGV[p + 1])], id)
  p = p + 4
  for j = 1, nb do
    local ki = tonumber(ARGV[p])
    local amount = tonumber(ARGV[p + 1])
    if held == 0 then amount = tonumber(ARGV[p + 2]) end
    p = p + 3
    if not add[ki] then
      add[ki] = 0
      order[#order + 1] = ki
    end
    add[ki] = add[ki] + amount
  end
end
for _, ki in ipairs(order) do
  if add[ki] ~= 0 and redis.call('EXISTS', KEYS[ki]) == 1 then
    redis.call('INCRBY', KEYS[ki], add[ki])
  end
end
return 1
`

// settleCallBefore builds the call settleScriptBefore took for jobs.
func settleCallBefore(l *Limiter, jobs []settleJob, marker, now string) (keys, args []string) {
	keys = []string{marker}
	index := map[string]int{}
	key := func(k string) string {
		i, ok := index[k]
		if !ok {
			keys = append(keys, k)
			i = len(keys)
			index[k] = i
		}
		return strconv.Itoa(i)
	}
	buckets := tokenSums(jobs)
	args = append(args, now, strconv.FormatInt(window, 10), strconv.Itoa(markerTTL), strconv.Itoa(len(buckets)), "")
	for _, b := range buckets {
		args = append(args, key(b.key), strconv.FormatInt(b.limit, 10), strconv.FormatInt(b.refund, 10), strconv.FormatInt(b.charge, 10))
	}
	nr := 0
	for _, j := range jobs {
		if len(j.budgets) == 0 {
			continue
		}
		nr++
		args = append(args, key(l.oldLedgerKey(j.tag)), key(l.ledgerHash(j.tag)), j.id, strconv.Itoa(len(j.budgets)))
		for _, k := range j.budgets {
			args = append(args, key(k), strconv.FormatInt(j.delta, 10), strconv.FormatInt(j.full, 10))
		}
	}
	args[4] = strconv.Itoa(nr)
	return keys, args
}

// TestSettleScriptMatchesBefore: on random batches — two ledgers in one
// call, reservations the ledger holds or no longer does, an id settled
// twice, token buckets absent, behind or ahead of now, counters absent,
// with and without an expiry, sums that cancel out — the settle script
// leaves Redis exactly as the script before it did: every value, every
// ledger entry, every expiry (to the millisecond the two runs lie apart).
func TestSettleScriptMatchesBefore(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, Options{Prefix: prefix, SweepEvery: -1})
	before := newScript(settleScriptBefore)
	do := redisDo(t, c)
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 14))
		now := time.Now().UnixMicro()
		tags := []string{"a", "b"}
		limits := []int64{60_000, 7_777_777, 1 << 40}
		var setup [][]string
		var buckets []tokenDelta
		var counters []string
		for _, tag := range tags {
			for i, lim := range limits {
				k := l.rateKey(tag, "rt", limit.ScopeKey, fmt.Sprint("k", i))
				buckets = append(buckets, tokenDelta{key: k, limit: lim})
				switch r.IntN(3) {
				case 1: // behind now: a full bucket not yet expired
					setup = append(setup, []string{"SET", k, strconv.FormatInt(now-r.Int64N(window), 10), "PX", "5000"})
				case 2:
					tat := now + r.Int64N(2*window)
					setup = append(setup, []string{"SET", k, strconv.FormatInt(tat, 10), "PX", strconv.FormatInt((tat-now)/1000+1000, 10)})
				}
			}
			for i := range 3 {
				b := limit.Budget{Scope: limit.ScopeProject, ID: fmt.Sprint("p", i), Period: limit.Month}
				k := l.budgetKey(tag, &b, "2031-01")
				counters = append(counters, k)
				switch r.IntN(3) {
				case 1:
					setup = append(setup, []string{"SET", k, strconv.FormatInt(r.Int64N(1e6), 10)})
				case 2:
					setup = append(setup, []string{"SET", k, strconv.FormatInt(r.Int64N(1e6), 10), "PX", "3600000"})
				}
			}
		}
		var jobs []settleJob
		var oldLayout, newLayout [][]string // the ledgers' entries, as each script wants them
		var oldJobs []settleJob             // jobs as the script before took them: plain ids
		for i := range 30 {
			g := r.IntN(len(tags))
			j := settleJob{tag: tags[g], id: fmt.Sprintf("%x-r%d", seed, i)}
			var prev *settleJob
			if i > 0 && r.IntN(10) == 0 { // the same reservation twice
				prev = &oldJobs[r.IntN(len(oldJobs))] // its plain id
				j.tag, g, j.id = prev.tag, slices.Index(tags, prev.tag), prev.id
			}
			for b := range 3 {
				if r.IntN(2) == 0 {
					d := r.Int64N(1000) - 500
					if d == 0 {
						d = 1
					}
					tb := buckets[g*3+b]
					j.tokens = append(j.tokens, tokenDelta{key: tb.key, limit: tb.limit, delta: d})
				}
			}
			for b := range 3 {
				if r.IntN(2) == 0 {
					j.budgets = append(j.budgets, counters[g*3+b])
				}
			}
			estimate := r.Int64N(10_000)
			j.full = r.Int64N(10_000)
			if r.IntN(8) == 0 {
				j.full = estimate // with the estimate right, some sums cancel out
			}
			if prev != nil { // one reservation: its budgets and estimate are the first's
				j.budgets, estimate = prev.budgets, prev.full-prev.delta
			}
			j.delta = j.full - estimate
			if len(j.tokens)+len(j.budgets) == 0 {
				continue
			}
			old := j
			if len(j.budgets) > 0 {
				// Known by its ledger entry now, by its id before.
				j.id = ledgerMember(old.id, strconv.FormatInt(estimate, 10), j.budgets)
				if r.IntN(10) < 7 {
					oldLayout = append(oldLayout, []string{"ZADD", l.oldLedgerKey(j.tag), "123", old.id},
						[]string{"HSET", l.ledgerHash(j.tag), old.id, "x"})
					newLayout = append(newLayout, []string{"ZADD", l.ledgerKey(j.tag), "123", j.id})
				}
			}
			jobs, oldJobs = append(jobs, j), append(oldJobs, old)
		}
		nowArg := strconv.FormatInt(now, 10)
		var states [2]map[string]keyState
		for run := range 2 {
			deleteMatching(c, prefix+"*")
			for _, cmd := range setup {
				do(cmd...)
			}
			for _, cmd := range [][][]string{oldLayout, newLayout}[run] {
				do(cmd...)
			}
			var keys, args []string
			s := &before
			if run == 0 {
				keys, args = settleCallBefore(l, oldJobs, l.markerKey("a", "before"), nowArg)
			} else {
				call := l.settleCallOf(jobs, nowArg)
				keys, args, s = call.keys, call.args, &l.settle
			}
			if n, err := l.run(ctx, s, keys, args).AsInt64(); err != nil || n != 1 {
				t.Fatalf("seed %d, run %d: %d, %v", seed, run, n, err)
			}
			if n, err := l.run(ctx, s, keys, args).AsInt64(); err != nil || n != 0 {
				t.Fatalf("seed %d, run %d, again: %d, %v; want 0", seed, run, n, err)
			}
			states[run] = snapshot(t, c, prefix)
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
}

type keyState struct {
	value string
	pttl  int64
}

// snapshot reads every key under prefix: its value (a sorted set's
// members and scores, a hash's fields and values, in order) and TTL. The
// settled marker's name differs from call to call, so it is read under
// one name. A tag's ledgers, the present one and the earlier versions'
// one, are read as one list of reservations, each as id, what it
// counts and deadline, whether its entry says what it counts
// (ledgerMember) or, as the scripts before the change wrote them, the
// hash beside it does: the reference scripts and the new ones leave
// the same reservations in their two layouts.
func snapshot(t *testing.T, c rueidis.Client, prefix string) map[string]keyState {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]keyState{}
	for _, k := range keys {
		typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		var v []string
		switch typ {
		case "string":
			s, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			v = []string{s}
		case "zset":
			var zs []rueidis.ZScore
			zs, err = c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
			for _, z := range zs {
				v = append(v, z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
		case "hash":
			var m map[string]string
			m, err = c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
			for f, x := range m {
				v = append(v, f+"="+x)
			}
			slices.Sort(v)
		}
		if err != nil {
			t.Fatal(err)
		}
		pttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(k, "}:s:") {
			k = "settled marker"
		}
		if strings.HasSuffix(k, "}:rh") {
			continue // read with its ledger
		}
		if base, ok := ledgerBase(k); ok && typ == "zset" {
			k = base + "ledgers"
			v = append(ledgerEntries(t, c, base+"rh", v), strings.Fields(strings.TrimPrefix(out[k].value, "zset:"))...)
			slices.Sort(v)
			pttl = -1 // never set on a ledger
		}
		out[k] = keyState{value: typ + ":" + strings.Join(v, " "), pttl: pttl}
	}
	return out
}

// ledgerBase is what precedes "r" or "rl" in the name of a tag's ledger
// of either layout.
func ledgerBase(k string) (string, bool) {
	for _, suffix := range []string{"}:rl", "}:r"} {
		if base, ok := strings.CutSuffix(k, suffix); ok {
			return base + "}:", true
		}
	}
	return "", false
}

// ledgerEntries turns a ledger's members and scores (ZRANGE WITHSCORES)
// into its reservations, "id|what-it-counts|@deadline", reading what an
// entry of the old layout counts from hash.
func ledgerEntries(t *testing.T, c rueidis.Client, hash string, withScores []string) []string {
	t.Helper()
	var out []string
	for i := 0; i+1 < len(withScores); i += 2 {
		id, held, ok := strings.Cut(withScores[i], "\x1f")
		if !ok {
			var err error
			held, err = c.Do(context.Background(), c.B().Hget().Key(hash).Field(id).Build()).ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				t.Fatal(err)
			}
		}
		out = append(out, id+"|"+strings.ReplaceAll(held, "\x1f", ",")+"|@"+withScores[i+1])
	}
	return out
}
