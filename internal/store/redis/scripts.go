package redis

// The scripts use microseconds for time: Lua numbers are doubles, exact
// to 2^53, and Unix microseconds (about 1.7e15) fit where nanoseconds
// would not.

// admitScript checks every counter of one request and reserves in all of
// them or none.
//
//	KEYS  rate buckets (nr of them), then budget counters
//	ARGV  1 now (µs)  2 nr  3 window (µs)
//	      then per rate bucket:    limit, cost
//	      then per budget counter: limit, cost, expire-at (ms, 0 = never)
//
// A rate bucket holds its GCRA theoretical arrival time (µs) and expires
// a second after that time passes (an absent bucket is a full one); the
// TTL is relative, so Redis's own clock does not matter. A budget
// counter holds micro-dollars spent and reserved.
//
// Reply: {allowed, refused (1-based index into KEYS, 0), retry-after (µs),
// then per rate bucket: remaining, reset (µs), then per budget counter:
// micro-dollars spent and reserved after this admission}.
const admitScript = `
local now = tonumber(ARGV[1])
local nr = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local refused, retry, refusedBudget, refusedLarge = 0, 0, false, false
local tats = {}
local out = {1, 0, 0}
for i = 1, nr do
  local limit = tonumber(ARGV[2 + 2 * i])
  local cost = tonumber(ARGV[3 + 2 * i])
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
local base = 3 + 2 * nr
for j = 1, #KEYS - nr do
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
  for j = 1, #KEYS - nr do
    local cost = tonumber(ARGV[base + 3 * j - 1])
    local exp = tonumber(ARGV[base + 3 * j])
    redis.call('INCRBY', KEYS[nr + j], cost)
    if exp > 0 then redis.call('PEXPIREAT', KEYS[nr + j], exp) end
  end
else
  out[1], out[2], out[3] = 0, refused, retry
end
for i = 1, nr do
  local limit = tonumber(ARGV[2 + 2 * i])
  local used = tats[i] - now
  local rem = 0
  if used < window then rem = math.floor((window - used) * limit / window) end
  out[#out + 1] = rem
  out[#out + 1] = used
end
for j = 1, #KEYS - nr do
  out[#out + 1] = tonumber(redis.call('GET', KEYS[nr + j]) or '0')
end
return out
`

// settleScript applies the difference between actual and reserved, once
// per reservation.
//
//	KEYS  1 the reservation's settled marker, then token buckets (nt),
//	      then budget counters
//	ARGV  1 now (µs)  2 nt  3 window (µs)  4 marker TTL (s)
//	      then per token bucket:   limit, delta tokens
//	      then per budget counter: delta micro-dollars
//
// Returns 1, or 0 when the reservation had been settled already (a retry
// after a lost reply). A refund to a bucket that has since emptied out
// (expired) is dropped: it is full anyway. A budget counter that expired
// or was lost is not recreated by a delta.
const settleScript = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[4])) then return 0 end
local now = tonumber(ARGV[1])
local nt = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
for i = 1, nt do
  local k = KEYS[1 + i]
  local limit = tonumber(ARGV[3 + 2 * i])
  local delta = tonumber(ARGV[4 + 2 * i])
  local v = redis.call('GET', k)
  local tat
  if delta < 0 then
    if v then tat = tonumber(v) - math.floor(-delta * window / limit) end
  else
    tat = now
    if v then tat = math.max(tonumber(v), now) end
    tat = tat + math.floor(delta * window / limit)
  end
  if tat then
    if tat <= now then
      redis.call('DEL', k)
    else
      redis.call('SET', k, string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
    end
  end
end
local base = 4 + 2 * nt
for j = 1, #KEYS - 1 - nt do
  local delta = tonumber(ARGV[base + j])
  if delta ~= 0 and redis.call('EXISTS', KEYS[1 + nt + j]) == 1 then
    redis.call('INCRBY', KEYS[1 + nt + j], delta)
  end
end
return 1
`

// seedScript restores budget counters from the durable record after Redis
// lost them: SET if absent, with the counter's expiry.
//
//	KEYS  budget counters   ARGV  per counter: micros, expire-at (ms, 0 = never)
const seedScript = `
local n = 0
for i = 1, #KEYS do
  local exp = tonumber(ARGV[2 * i])
  local ok
  if exp > 0 then
    ok = redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'NX', 'PXAT', exp)
  else
    ok = redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'NX')
  end
  if ok then n = n + 1 end
end
return n
`
