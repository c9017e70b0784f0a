package redis

// The scripts use microseconds for time: Lua numbers are doubles, exact
// to 2^53, and Unix microseconds (about 1.7e15) fit where nanoseconds
// would not.

// rateStep is one rate bucket's check in admitScript and admitBatchScript,
// shared so the two apply one rule: with the bucket's arrival time tat
// (now when it is behind) and the request's increment inc, it refuses
// when the bucket would run more than the window ahead, and otherwise
// moves tat on. Of the buckets that refuse, the one reported is the first
// too small for the request whatever it held (its retry-after 0: waiting
// never helps), or else the one with the longest wait.
const rateStep = `
local wait = tat + inc - now - window
if wait > 0 then
  if refused == 0 or (not refusedLarge and (inc > window or wait > retry)) then
    refused, retry, refusedLarge = i, wait, inc > window
    if refusedLarge then retry = 0 end
  end
else
  tat = tat + inc
end
`

// admitScript checks every counter of one request and reserves in all of
// them or none.
//
//	KEYS  rate buckets (nr of them), then budget counters, then, when
//	      the counters have a durable record, the tag's seeded marker,
//	      then with budgets the reservation ledger (a sorted set)
//	ARGV  1 now (µs)  2 nr  3 window (µs)  4 ledger: 0 none, 1 ledger,
//	      2 ledger and marker  5 the reservation's ledger entry
//	      (ledgerMember: its id, cost and budget counters)  6 its
//	      deadline (ms)  7 the request's cost (micro-dollars)
//	      then per rate bucket:    increment (µs: cost × window / limit,
//	                               floored), then its arrival time and
//	                               TTL (ms) if it is behind now (now +
//	                               increment, and that less now in ms,
//	                               rounded up, + 1000)
//	      then per budget counter: threshold (limit − cost: refused when
//	                               the counter holds more), expire-at (ms,
//	                               0 = never)
//
// A rate bucket holds its GCRA theoretical arrival time (µs) and expires
// a second after that time passes (an absent bucket is a full one); the
// TTL is relative, so Redis's own clock does not matter. A budget
// counter holds micro-dollars spent and reserved; its expiry is set when
// the admission creates it and never changes after (the key names the
// period it counts; the lease, seed and carry scripts, the only others
// that create a counter, set the same expiry). An admitted request
// with budgets is written to the ledger (member: its id, cost and
// budget counters, as ledgerMember writes them; score: its deadline),
// so a reservation its replica never settles (a crash) is released by
// sweepScript, and a settle knows whether its reservation is still
// counted. The member says all a sweep needs: one ZADD an admission,
// where an id with a hash field of what it counts beside it took an
// HSET too, the dearest command of an admission (BENCHMARKS.md, "The
// ledger in one sorted set").
//
// The script is the Redis CPU of every cluster-mode request, so it keeps
// that small: one MGET reads every counter and the marker, INCRBY's reply
// is the budget's figure, the caller does the arithmetic that needs no
// counter (the increments, the thresholds, what a bucket has left, a
// bucket's new arrival time and TTL when it was behind now, the usual
// case below the limit), numbers are coerced with '+ 0' (tonumber parses
// a string twice) and sent to Redis as strings already made (ARGV) or
// with '%d' (Redis formats a Lua number with '%.17g', at many times the
// cost; '%d' still costs a few thousand instructions a number).
//
// Reply: {allowed, refused (1-based index into KEYS, 0), retry-after (µs),
// then per rate bucket: its arrival time less now (µs: the reset; the
// caller works out what is left from it), then per budget counter:
// micro-dollars spent and reserved after this admission}; or {-1} when
// the seeded marker is missing: Redis lost the tag's counters, which
// must be rebuilt from the durable record before anything is admitted
// against them.
const admitScript = `
local now = ARGV[1] + 0
local nr = ARGV[2] + 0
local window = ARGV[3] + 0
local mode = ARGV[4]
local nc = #KEYS
if mode ~= '0' then nc = nc - 1 end
local nb = nc - nr
if mode == '2' then nb = nb - 1 end
local vals = redis.call('MGET', unpack(KEYS, 1, nc))
if mode == '2' and not vals[nc] then return {-1} end
local refused, retry, refusedBudget, refusedLarge = 0, 0, false, false
local out = {1, 0, 0}
for i = 1, nr do
  local inc = ARGV[5 + 3 * i] + 0
  local tat = now
  local v = vals[i]
  if v then
    v = v + 0
    if v > now then tat = v end
  end
` + rateStep + `  out[3 + i] = tat
end
local base = 7 + 3 * nr
for j = 1, nb do
  local v = vals[nr + j]
  local used = 0
  if v then used = v + 0 end
  out[3 + nr + j] = used
  if not refusedBudget and used > ARGV[base + 2 * j - 1] + 0 then
    refused, retry, refusedBudget = nr + j, 0, true
  end
end
if refused == 0 then
  for i = 1, nr do
    local tat = out[3 + i]
    local a = 5 + 3 * i
    if tat - now == ARGV[a] + 0 then
      redis.call('SET', KEYS[i], ARGV[a + 1], 'PX', ARGV[a + 2])
    else
      redis.call('SET', KEYS[i], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000) + 1000))
    end
  end
  local cost = ARGV[7]
  for j = 1, nb do
    local k = KEYS[nr + j]
    out[3 + nr + j] = redis.call('INCRBY', k, cost)
    if not vals[nr + j] then
      local exp = ARGV[base + 2 * j]
      if exp ~= '0' then redis.call('PEXPIREAT', k, exp) end
    end
  end
  if mode ~= '0' then redis.call('ZADD', KEYS[nc + 1], ARGV[6], ARGV[5]) end
else
  out[1], out[2], out[3] = 0, refused, retry
end
for i = 1, nr do out[3 + i] = out[3 + i] - now end
return out
`

// settleScript applies the settles of a batch of reservations — the
// difference between what each reserved and what it used — in one call,
// once per batch.
//
//	KEYS  1 the batch's settled marker, then the token buckets (nt), then
//	      the budget counters (nc), then the ledgers (ng)
//	ARGV  1 now (µs)  2 marker TTL (s)  3 nt  4 nc  5 ng
//	      then per token bucket: refund, charge (µs of the bucket: tokens
//	      × window / limit, floored)
//	      then per budget counter: micro-dollars to add when every
//	      reservation is still in its ledger (the sum of their deltas)
//	      then per ledger: n, the entries of its n reservations
//	      (ledgerMember), then one
//	      'extra,counter,counter…;extra,counter…' with a part per
//	      reservation: what to add to each of its counters (1-based
//	      among the nc) when the ledger no longer holds it: actual −
//	      delta, its estimate
//
// A token bucket's refunds and charges are summed over the batch by the
// caller; the refund is applied first, the order that leaves the bucket
// fullest of all the orders the settles could have run in, so a batch
// never admits more than the same settles one by one would have. A
// refund to a bucket that has since emptied out (expired) is dropped: it
// is full anyway. A reservation's estimate is in its budget counters
// while the ledger holds it: then the delta applies; when the ledger no
// longer does (swept after a crash's deadline, or lost with the counters,
// which were rebuilt from the durable record since), the actual cost is
// added whole. The budget amounts are summed per counter, and a counter
// that expired or was lost is not recreated.
//
// As for admitScript, Redis's CPU is what this saves: one MGET reads the
// buckets and counters; per ledger, one ZMSCORE says which of the
// batch's reservations it still holds and one ZREM takes them out (in
// slices of 1000: Lua's unpack is bounded; a deadline is a whole number
// of milliseconds, which Redis prints as an integer); the counters'
// sums, right when every reservation is still held, go to INCRBY as the
// caller wrote them, and a reservation's own figures (one argument for
// the whole ledger, not one each) are read only when its ledger no
// longer holds it.
//
// Returns 1, or 0 when the batch had been settled already (a retry after
// a lost reply).
const settleScript = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then return 0 end
local function run(cmd, key, t, from, to)
  local r
  while from <= to do
    local last = math.min(to, from + 999)
    local part
    if key then
      part = redis.call(cmd, key, unpack(t, from, last))
    else
      part = redis.call(cmd, unpack(t, from, last))
    end
    if type(part) == 'number' then
      r = (r or 0) + part
    elseif not r then
      r = part
    else
      for k = 1, last - from + 1 do r[#r + 1] = part[k] end
    end
    from = last + 1
  end
  return r
end
local now = ARGV[1] + 0
local nt = ARGV[3] + 0
local nc = ARGV[4] + 0
local ng = ARGV[5] + 0
local vals = {}
if nt + nc > 0 then vals = run('MGET', nil, KEYS, 2, 1 + nt + nc) end
for i = 1, nt do
  local k = KEYS[1 + i]
  local charge = ARGV[5 + 2 * i] + 0
  local v = vals[i]
  local tat
  if v then tat = v - ARGV[4 + 2 * i] end
  if charge > 0 then
    if not tat or tat < now then tat = now end
    tat = tat + charge
  end
  if tat then
    if tat <= now then
      redis.call('DEL', k)
    else
      redis.call('SET', k, string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000) + 1000))
    end
  end
end
local sums = 6 + 2 * nt
local q = sums + nc
local ledgers = 1 + nt + nc
local extra
for g = 1, ng do
  local n = ARGV[q] + 0
  local zk = KEYS[ledgers + g]
  local missed
  local held = run('ZMSCORE', zk, ARGV, q + 1, q + n)
  local nheld = 0
  for r = 1, n do
    if held[r] then
      nheld = nheld + 1
    else
      missed = missed or {}
      missed[r] = true
    end
  end
  if nheld > 0 and run('ZREM', zk, ARGV, q + 1, q + n) < nheld then
    -- A reservation listed twice is held for its first settle only.
    local seen = {}
    for r = 1, n do
      local m = ARGV[q + r]
      if held[r] and seen[m] then
        missed = missed or {}
        missed[r] = true
      end
      seen[m] = true
    end
  end
  if missed then
    extra = extra or {}
    local r = 0
    for desc in string.gmatch(ARGV[q + n + 1], '[^;]+') do
      r = r + 1
      if missed[r] then
        local e
        for part in string.gmatch(desc, '[^,]+') do
          if e then
            local j = part + 0
            extra[j] = (extra[j] or 0) + e
          else
            e = part + 0
          end
        end
      end
    end
  end
  q = q + 2 + n
end
for j = 1, nc do
  if vals[nt + j] then
    local s = ARGV[sums + j - 1]
    if extra and extra[j] then
      local add = s + extra[j]
      if add ~= 0 then redis.call('INCRBY', KEYS[1 + nt + j], string.format('%d', add)) end
    elseif s ~= '0' then
      redis.call('INCRBY', KEYS[1 + nt + j], s)
    end
  end
end
return 1
`

// seedScript restores budget counters from the durable record after Redis
// lost them. A counter Redis has is kept unless the record holds more:
// a live counter counts reservations the record does not, while one
// created since the loss (spend a fallback carried back after an outage)
// counts less than the record, which holds that spend and all before
// it. The expiry is the counter's own. With the tag's seeded marker as
// the last key it also sets the marker, after the counters, to the time
// of the rebuild: admissions against the tag wait for it.
//
//	KEYS  budget counters, then the marker (when ARGV[1] is not empty)
//	ARGV  1 the marker's value (the rebuild's time, ms) or '', then per
//	      counter: micros, expire-at (ms, 0 = never)
//
// Returns how many counters it set.
const seedScript = `
local n = 0
local nc = #KEYS
if ARGV[1] ~= '' then nc = nc - 1 end
for i = 1, nc do
  local want = tonumber(ARGV[2 * i])
  local have = tonumber(redis.call('GET', KEYS[i]) or '-1')
  if want > have then
    local exp = tonumber(ARGV[2 * i + 1])
    if exp > 0 then
      redis.call('SET', KEYS[i], ARGV[2 * i], 'PXAT', exp)
    else
      redis.call('SET', KEYS[i], ARGV[2 * i])
    end
    n = n + 1
  end
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[#KEYS], ARGV[1]) end
return n
`

// sweepScript releases the reservations of one tag whose deadline has
// passed and whose replica is gone — it crashed, or lost Redis, before
// settling — by taking each one's cost back off its counters (never below
// zero). An expired reservation of a replica still alive stays: its
// settle is late or was dropped, and counting the estimate errs on the
// safe side. A reservation's id starts with its replica's id.
//
//	KEYS  1 a ledger: the present one, or the one of ids that earlier
//	      versions wrote  2 the hash in which those versions kept what
//	      each id counts
//	ARGV  1 now (ms)  2 skip this many expired ones  3 look at most at this
//	      many  4… the ids of the replicas alive
//
// Returns {released, looked at}.
const sweepScript = `
local live = {}
for i = 4, #ARGV do live[ARGV[i]] = true end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', tonumber(ARGV[2]), tonumber(ARGV[3]))
local released = 0
for _, id in ipairs(ids) do
  local owner = string.match(id, '^[^-]*%-')
  if not (owner and live[owner]) then
    local rec
    local cut = string.find(id, '\31', 1, true)
    if cut then
      rec = string.sub(id, cut + 1)
    else
      rec = redis.call('HGET', KEYS[2], id)
      redis.call('HDEL', KEYS[2], id)
    end
    if rec then
      local cost
      for part in string.gmatch(rec, '[^\31]+') do
        if not cost then
          cost = tonumber(part)
        elseif redis.call('EXISTS', part) == 1 then
          if redis.call('DECRBY', part, cost) < 0 then redis.call('SET', part, '0', 'KEEPTTL') end
        end
      end
    end
    redis.call('ZREM', KEYS[1], id)
    released = released + 1
  end
end
return {released, #ids}
`

// readCounters is how the batch scripts begin: one MGET of the nc
// counters (KEYS, as K) and, in ledger mode '2', the tag's seeded marker
// after them, whose absence ends the script with {-1} (admitScript's
// answer when Redis lost the tag's counters). n is then the index of the
// last key read: the ledger's keys follow it.
const readCounters = `
local n = nc
if mode == '2' then n = nc + 1 end
local vals = redis.call('MGET', unpack(K, 1, n))
if mode == '2' and not vals[n] then return {-1} end
`

// admitBatchScript is admitScript for several admissions of one tag at
// once (admitbatch.go): each is checked and reserved in all of its
// counters or none, in the order given, exactly as that many calls of
// admitScript one after the other would at one instant. It exists for
// Redis's CPU: a call's fixed cost (the command, the script's setup, the
// MGET) is paid once for the batch, and each counter is written once,
// with its final value, however many admissions moved it.
//
//	KEYS  the counters of every admission, each once (nc), then, when
//	      the counters have a durable record, the tag's seeded marker,
//	      then with budgets the reservation ledger
//	ARGV  1 now (µs)  2 window (µs)  3 nc  4 ledger: 0 none, 1 ledger,
//	      2 ledger and marker
//	      then per admission: its rate buckets (nr), budget counters
//	      (nb), its ledger entry ("" when it goes in no ledger: no
//	      budgets), its deadline (ms) and cost (micro-dollars); per
//	      rate bucket its
//	      counter (1-based among the nc) and increment; per budget
//	      counter its counter, threshold and expire-at, as admitScript
//	      takes them
//
// Its Lua is written for the interpreter's cost, measured in Redis's
// own CPU time (BENCHMARKS.md, "Admissions batched"): ARGV and KEYS are
// locals; each distinct number string is parsed once (num, a memo:
// indexes and increments repeat across a batch); one table of counter
// indexes serves every admission; the ledger's entry comes made.
//
// Reply: each admission's admitScript reply, one after the other; or
// {-1} when the seeded marker is missing.
const admitBatchScript = `
local A, K = ARGV, KEYS
local num = setmetatable({}, {__index = function(t, s) local v = s + 0; t[s] = v; return v end})
local now = A[1] + 0
local window = A[2] + 0
local nc = A[3] + 0
local mode = A[4]
` + readCounters + `local cur = {}
for k = 1, nc do
  local v = vals[k]
  if v then cur[k] = v + 0 end
end
local written, added, expat = {}, {}, {}
local zadd, z = {}, 0
local out, o = {}, 0
local ks = {}
local p, last = 5, #A
while p <= last do
  local nr, nb, member = num[A[p]], num[A[p + 1]], A[p + 2]
  local rb = p + 5
  local bb = rb + 2 * nr
  local refused, retry, refusedBudget, refusedLarge = 0, 0, false, false
  for i = 1, nr do
    local a = rb + 2 * i - 2
    local k, inc = num[A[a]], num[A[a + 1]]
    ks[i] = k
    local tat = now
    local v = cur[k]
    if v and v > now then tat = v end
` + rateStep + `    out[o + 3 + i] = tat
  end
  for j = 1, nb do
    local a = bb + 3 * j - 3
    local k = num[A[a]]
    ks[nr + j] = k
    local used = cur[k] or 0
    out[o + 3 + nr + j] = used
    if not refusedBudget and used > num[A[a + 1]] then
      refused, retry, refusedBudget = nr + j, 0, true
    end
  end
  if refused == 0 then
    out[o + 1], out[o + 2], out[o + 3] = 1, 0, 0
    for i = 1, nr do
      local k = ks[i]
      cur[k], written[k] = out[o + 3 + i], true
    end
    if nb > 0 then
      local c = num[A[p + 4]]
      for j = 1, nb do
        local k = ks[nr + j]
        local used = (cur[k] or 0) + c
        cur[k], added[k], expat[k] = used, (added[k] or 0) + c, A[bb + 3 * j - 1]
        out[o + 3 + nr + j] = used
      end
    end
    if member ~= '' then
      zadd[z + 1], zadd[z + 2] = A[p + 3], member
      z = z + 2
    end
  else
    out[o + 1], out[o + 2], out[o + 3] = 0, refused, retry
  end
  for i = 1, nr do out[o + 3 + i] = out[o + 3 + i] - now end
  o = o + 3 + nr + nb
  p = bb + 3 * nb
end
for k = 1, nc do
  if written[k] then
    local tat = cur[k]
    redis.call('SET', K[k], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000) + 1000))
  elseif added[k] then
    redis.call('INCRBY', K[k], string.format('%d', added[k]))
    if not vals[k] and expat[k] ~= '0' then redis.call('PEXPIREAT', K[k], expat[k]) end
  end
end
if z > 0 then redis.call('ZADD', K[n + 1], unpack(zadd)) end
return out
`

// admitAllScript admits a whole batch of one tag's admissions when every
// one of them fits (admitbatch.go), the usual case below the limits, with
// no work in Lua per admission: gatehouse sums the batch per counter and
// sends, for each, the bound its value must be within for every
// admission to pass (a rate bucket: now + window − the batch's
// increments, which its arrival time must not pass; a budget counter:
// the least of each admission's threshold less what the admissions
// before it add, which its spend must not pass), and what the batch adds
// to it. When a counter is out of bounds nothing is written and the reply
// says so; gatehouse then sends the batch to admitBatchScript, which
// decides each admission on its own.
//
// Passing every bound is exactly every admission passing one after the
// other: the increments and costs are never negative, so of a counter's
// admissions the last is the one nearest its limit.
//
//	KEYS  as admitBatchScript's
//	ARGV  1 now (µs)  2 nc  3 ledger: 0 none, 1 ledger, 2 ledger and
//	      marker
//	      then per counter: 'r' (a rate bucket) or 'b' (a budget
//	      counter), its bound, what the batch adds (µs or
//	      micro-dollars), its expire-at (ms, 0 = never; budgets only)
//	      then m, the admissions that go into the ledger, then m pairs
//	      of deadline and ledger entry (ZADD's)
//
// Reply: {2, then per counter its value before the batch: a bucket's
// arrival time less now (at least 0), a budget's spend}, from which
// gatehouse works out each admission's figures as admitScript gives
// them; {0} when a counter is out of bounds; {-1} when the seeded marker
// is missing.
const admitAllScript = `
local A, K = ARGV, KEYS
local now = A[1] + 0
local nc = A[2] + 0
local mode = A[3]
` + readCounters + `local out = {2}
for k = 1, nc do
  local a = 4 * k
  local v = vals[k]
  if A[a] == 'r' then
    local tat = now
    if v then
      v = v + 0
      if v > now then tat = v end
    end
    if tat > A[a + 1] + 0 then return {0} end
    out[k + 1] = tat - now
  else
    local used = 0
    if v then used = v + 0 end
    if used > A[a + 1] + 0 then return {0} end
    out[k + 1] = used
  end
end
for k = 1, nc do
  local a = 4 * k
  if A[a] == 'r' then
    local tat = now + out[k + 1] + A[a + 2]
    redis.call('SET', K[k], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000) + 1000))
  else
    redis.call('INCRBY', K[k], A[a + 2])
    if not vals[k] and A[a + 3] ~= '0' then redis.call('PEXPIREAT', K[k], A[a + 3]) end
  end
end
local z = 4 * nc + 4
local m = A[z] + 0
if m > 0 then
  redis.call('ZADD', K[n + 1], unpack(A, z + 1, z + 2 * m))
end
return out
`
