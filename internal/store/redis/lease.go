package redis

import (
	"context"
	"fmt"
	"strconv"

	"gatehouse/internal/limit"
)

// leaseScript exchanges units between a replica's leases (limit.Leaser)
// and the shared counters of one tag: for every counter it first applies
// what is handed back, then takes what it can of what is wanted — at
// least the need of every counter that has one, or nothing anywhere. A
// grant is at most half of what a counter has left (but at least its
// need), so leases shrink as a limit runs out and every replica keeps a
// share of the rest.
//
//	KEYS  1 the exchange's marker, then the counters (n), then, when the
//	      budgets have a durable record, the tag's seeded marker
//	ARGV  1 now (µs)  2 window (µs)  3 n  4 marker TTL (s)  5 check the
//	      seeded marker (1) or not (0)
//	      then per counter: kind ('r' rate bucket, 'b' budget), limit,
//	      back, want, need, expire-at (ms, 0 = never; budgets)
//
// A rate bucket is the GCRA arrival time the admission script keeps:
// taking k units moves it k × window / limit later, handing them back
// as much earlier (never before now: an empty bucket is a full one). A
// budget counter gains what is taken and loses what is handed back
// (never below zero; a missing counter, expired or lost, is not made
// again by a hand-back alone). A negative back charges more: spend a
// settle found above its estimate.
//
// Reply: {refused (1-based counter index, 0), then per counter: granted,
// free after}; {-1} when the seeded marker is missing (the budgets must
// be rebuilt from the durable record first); {-2} when the marker says
// this exchange ran already.
const leaseScript = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[n + 2]) == 0 then return {-1} end
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[4])) then return {-2} end
local state, free, exists = {}, {}, {}
for i = 1, n do
  local b = 5 + 6 * (i - 1)
  local limit = tonumber(ARGV[b + 2])
  local back = tonumber(ARGV[b + 3])
  local v = redis.call('GET', KEYS[1 + i])
  exists[i] = v ~= false
  if ARGV[b + 1] == 'r' then
    local tat = now
    if v then tat = math.max(tonumber(v), now) end
    if back > 0 then
      tat = math.max(tat - math.floor(back * window / limit), now)
    elseif back < 0 then
      tat = tat + math.floor(-back * window / limit)
    end
    state[i] = tat
    local used = tat - now
    free[i] = 0
    if used < window then free[i] = math.floor((window - used) * limit / window) end
  else
    local used = tonumber(v or '0')
    if v or back < 0 then used = math.max(used - back, 0) end
    state[i] = used
    free[i] = math.max(limit - used, 0)
  end
end
local refused = 0
for i = 1, n do
  local need = tonumber(ARGV[5 + 6 * (i - 1) + 5])
  if need > 0 and free[i] < need then refused = i; break end
end
local out = {refused}
for i = 1, n do
  local b = 5 + 6 * (i - 1)
  local limit = tonumber(ARGV[b + 2])
  local back = tonumber(ARGV[b + 3])
  local want = tonumber(ARGV[b + 4])
  local need = tonumber(ARGV[b + 5])
  local g = 0
  if refused == 0 and want > 0 then
    g = math.min(want, math.max(need, math.floor(free[i] / 2)), free[i])
  end
  local k = KEYS[1 + i]
  if ARGV[b + 1] == 'r' then
    if back ~= 0 or g > 0 then
      local tat = state[i] + math.floor(g * window / limit)
      if tat <= now then
        redis.call('DEL', k)
      else
        redis.call('SET', k, string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
      end
    end
  elseif (back ~= 0 and (exists[i] or back < 0)) or g > 0 then
    local exp = tonumber(ARGV[b + 6])
    if exp > 0 then
      redis.call('SET', k, string.format('%d', state[i] + g), 'PXAT', exp)
    else
      redis.call('SET', k, string.format('%d', state[i] + g))
    end
  end
  out[#out + 1] = g
  out[#out + 1] = free[i] - g
end
return out
`

// Lease implements limit.LeaseStore: one script call for every counter
// of one tag. It reads the seeded marker when a budget is among the
// counters and the durable record is set, and rebuilds the tag's budgets
// from the record first when Redis lost them, as Admit does.
func (l *Limiter) Lease(ctx context.Context, rawTag, id string, ops []limit.LeaseOp) (limit.LeaseReply, error) {
	tag := tagOf(&limit.Admission{Tag: rawTag})
	keys := make([]string, 1, len(ops)+2)
	keys[0] = l.prefix + "{" + tag + "}:x:" + l.idBase + id
	args := make([]string, 5, 5+6*len(ops))
	args[0] = strconv.FormatInt(l.now().UnixMicro(), 10)
	args[1] = strconv.FormatInt(window, 10)
	args[2] = strconv.Itoa(len(ops))
	args[3] = strconv.Itoa(markerTTL)
	args[4] = "0"
	budgets := false
	for i := range ops {
		op := &ops[i]
		c := &op.Counter
		kind, exp := "r", int64(0)
		switch c.Kind {
		case limit.KindRequests:
			keys = append(keys, l.rateKey(tag, "rq", c.Scope, c.ID))
		case limit.KindTokens:
			keys = append(keys, l.rateKey(tag, "rt", c.Scope, c.ID))
		case limit.KindBudget:
			kind, budgets = "b", true
			b := limit.Budget{Scope: c.Scope, ID: c.ID, Period: c.Period}
			keys = append(keys, l.budgetKey(tag, &b, c.Start))
			if !c.End.IsZero() {
				exp = c.End.Add(budgetGrace).UnixMilli()
			}
		default:
			return limit.LeaseReply{}, fmt.Errorf("redis: lease: unknown counter kind %q", c.Kind)
		}
		if op.Limit <= 0 && kind == "r" { // a rate of 0 is no limit, and never leased
			return limit.LeaseReply{}, fmt.Errorf("redis: lease: rate %s %s has limit %d", c.Kind, c.ID, op.Limit)
		}
		args = append(args, kind, strconv.FormatInt(op.Limit, 10), strconv.FormatInt(op.Back, 10),
			strconv.FormatInt(op.Want, 10), strconv.FormatInt(op.Need, 10), strconv.FormatInt(exp, 10))
	}
	if budgets && l.store != nil {
		args[4] = "1"
		keys = append(keys, l.seededKey(tag))
	}
	out, err := l.leaseOnce(ctx, keys, args)
	if err == nil && len(out) == 1 && out[0] == -1 {
		if err = l.seedTag(ctx, tag, rawTag); err == nil {
			out, err = l.leaseOnce(ctx, keys, args)
		}
	}
	if err != nil {
		return limit.LeaseReply{}, err
	}
	rep := limit.LeaseReply{Granted: make([]int64, len(ops)), Free: make([]int64, len(ops))}
	if len(out) == 1 && out[0] == -2 {
		return rep, nil // ran already: a retry of a hand-back whose reply was lost
	}
	if len(out) != 1+2*len(ops) {
		return limit.LeaseReply{}, fmt.Errorf("redis: lease: %w: reply of %d values, want %d", limit.ErrUnavailable, len(out), 1+2*len(ops))
	}
	rep.Refused = int(out[0])
	for i := range ops {
		rep.Granted[i], rep.Free[i] = out[1+2*i], out[2+2*i]
	}
	return rep, nil
}

// leaseOnce runs the lease script within the admission timeout.
func (l *Limiter) leaseOnce(ctx context.Context, keys, args []string) ([]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	out, err := l.run(cctx, &l.lease, keys, args).AsIntSlice()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("redis: lease: %w", ctx.Err())
		}
		return nil, fmt.Errorf("redis: lease: %w: %w", limit.ErrUnavailable, err)
	}
	return out, nil
}

// RecordSpend implements limit.LeaseStore: spend settled against a lease
// goes to the durable record like any settle's.
func (l *Limiter) RecordSpend(k limit.BudgetKey, micros int64) {
	if l.spend != nil {
		l.spend.Add(k, micros)
	}
}

var _ limit.LeaseStore = (*Limiter)(nil)
