-- counter.lua: hand out one segment of counter-mode values (INCRBY with
-- floors). guard.lua runs first.
--
-- KEYS[1] {ns}:counter, KEYS[2] {ns}:layout, KEYS[3] {ns}:events,
-- KEYS[4] {ns}:meta
-- ARGV and reply: CounterArgs (counter.go).
--
-- The key holds the last value handed out as tick and seq (value = tick
-- << bits | seq; Go composes it). Values start above the stored one, T - 1
-- (T: the tick of Redis TIME), the caller's floor, and after a loss or
-- with the key missing loss_ms + skew + lead; none past T + lead (then
-- AHEAD). The lead is fleet-wide ({ns}:meta). Why: docs/design.md, Why the
-- scripts are safe.
local n, epochUs, unitUs = tonumber(A.n), tonumber(A.epochUs), tonumber(A.tickUs)
local bits, lead = tonumber(A.bits), tonumber(A.lead)
local P = 2 ^ bits
local MASK = P - 1

local _, _, nowUs = redisNow()
local T = tickOf(nowUs, epochUs, unitUs)
local _, lossMs = guard(KEYS[4], KEYS[3], {'host', A.host, 'pid', A.pid}, T)
local lossTick = tickOf((lossMs + redisSkewMs) * 1000, epochUs, unitUs)

local function less(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end
local function maxOf(a, b) if less(a, b) then return b end return a end
local function pred(a)
  if a[2] > 0 then return {a[1], a[2] - 1} end
  return {a[1] - 1, MASK}
end

local fleet = fleetLayout(KEYS[2], A.layout)
if fleet ~= A.layout then
  return {'LAYOUT', fleet}
end
local fleetLead = fleetValue(KEYS[4], 'counter_lead', lead)
local reach, lossLead = math.min(lead, fleetLead), math.max(lead, fleetLead)

local stored = redis.call('HMGET', KEYS[1], 'tick', 'seq')
local cur
if stored[1] then
  cur = {tonumber(stored[1]), tonumber(stored[2])}
  if not cur[1] or not cur[2] or cur[2] > MASK then
    fail('INVALID', KEYS[1] .. ' holds tick ' .. stored[1] .. ' seq ' .. tostring(stored[2]) .. ': not a counter value')
  end
  cur = maxOf(maxOf(cur, {T - 1, MASK}), {lossTick + lossLead, MASK})
else
  stored = nil
  cur = {math.max(T, lossTick) + lossLead, MASK}
end
local minValue = {tonumber(A.minTick), tonumber(A.minSeq)}
if not minValue[1] or not minValue[2] then
  fail('INVALID', 'counter.lua: min value ' .. tostring(A.minTick) .. ' ' .. tostring(A.minSeq) .. ' is not a counter value')
end
cur = maxOf(cur, pred(minValue))
cur = maxOf(cur, {-1, MASK})

if not stored then
  emit('counter_init', A.counterID, 'tick', T, 'value_tick', cur[1], 'value_seq', cur[2],
    'detail', 'counter key missing (first use, or Redis lost its data): floored to Redis TIME + lead')
end

local first = {cur[1], cur[2] + 1}
if first[2] > MASK then first = {first[1] + 1, 0} end
local limit = T + reach
if first[1] > limit then
  if not stored and cur[1] >= 0 then redis.call('HSET', KEYS[1], 'tick', cur[1], 'seq', cur[2]) end
  return {'AHEAD', T, first[1]}
end
local s = first[2] + n - 1
local last = {first[1] + math.floor(s / P), s % P}
if last[1] > limit then last = {limit, MASK} end
redis.call('HSET', KEYS[1], 'tick', last[1], 'seq', last[2])
local need, listed = replicasNeeded(KEYS[4])
return {'OK', first[1], first[2], last[1], last[2], T, need, listed}
