-- counter.lua: hand out one segment of counter-mode values (INCRBY with
-- floors). guard.lua runs first.
--
-- KEYS[1] {ns}:counter, KEYS[2] {ns}:layout, KEYS[3] {ns}:events,
-- KEYS[4] {ns}:meta
-- ARGV: 1 n, the segment size (1..2^24), 2 epoch (us since the Unix epoch),
--   3 tick length (us), 4 bits of sequence (1..30), 5 lead (ticks, >= 0),
--   6 min value: the caller's floor, a counter value the segment must not
--      start below ("0" for none), in decimal;
--   7 the caller's canonical layout: a fleet layout that differs is
--      refused (counter IDs of another layout could equal flake IDs), a
--      missing one is set;
--   8 events maxlen, 9 counter machine ID, 10 host, 11 pid: a counter
--      (re)created from its floor writes a counter_init event;
--   12 generation to create {ns}:meta with, when it is missing,
--   13 layout settle (ms): when this call stores the fleet layout, nothing
--      is handed out for this long (see renew.lua: an owner from before a
--      loss may restore another layout meanwhile),
--   14 identity ("info", or the operator's opt-in "none": guard.lua).
--
-- The lead is fleet-wide: the first counter stores it in {ns}:meta; no
-- value runs more than the smaller of it and ours ahead of TIME, and after
-- a loss values start above the larger, so a counter configured with
-- another lead cannot repeat what one with a longer lead handed out.
--
-- A counter value v stands for (tick = v >> bits, seq = v & mask); the ID is
-- v << machine bits | counter machine ID. The key holds the last value
-- handed out, as a decimal string (what INCRBY would leave there).
--
-- Floors: the value is raised to at least max(stored, T << bits - 1,
-- min value - 1), T being the tick of Redis TIME. When the key is missing
-- (first use, or Redis lost its data) the floor is (T + lead + 1) << bits - 1
-- instead: a counter that ran up to lead ticks ahead before the loss never
-- repeats. A key that is present may be older than what was handed out
-- (Redis lost a suffix of its writes: guard.lua): it is floored the same
-- way from the moment the loss was noticed, loss_ms in {ns}:meta. No value with a tick above T + lead is handed out: the segment is
-- cut there, and when nothing is left the reply is AHEAD (the caller waits a
-- tick; a missing key is still created at its floor, so one tick suffices).
--
-- Integer precision: values reach 2^62, but Lua numbers are doubles, exact
-- only up to 2^53. So no full value is ever held in a number: the stored
-- decimal is split into (tick, seq) by exact long division on its digits,
-- all arithmetic is done on the pair, and the pair is written back by exact
-- digit-by-digit multiplication (every intermediate stays below 2^35). seq
-- is below 2^30, and a tick below 2^53 / 10 covers 28,000 years of 1 ms
-- ticks; a stored value whose tick is larger is refused as corrupt.
--
-- Returns {"OK", first, last, T, replicas that must acknowledge the
-- segment before it is used, replicas listed now (replicas.lua)} (first
-- and last decimal strings, both inclusive) or {"AHEAD", T, tick of the next value} or {"SETTLE", T, tick
-- when the layout has settled}.
local n, epochUs, unitUs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local bits, lead = tonumber(ARGV[4]), tonumber(ARGV[5])
local P = 2 ^ bits
local MASK = P - 1
local MAXTICK = 2 ^ 53 / 10

local _, _, nowUs = redisNow()
local T = math.floor((nowUs - epochUs) / unitUs)
local _, lossMs, _, lossID = guard(KEYS[4], KEYS[3], ARGV[8], ARGV[12], {'created_tick', T},
  {'host', ARGV[10], 'pid', ARGV[11]}, ARGV[14])
local lossTick = tickOf(lossMs + redisSkewMs, epochUs, unitUs)

-- parse splits a decimal counter value into {tick, seq}, or returns nil.
local function parse(s)
  if type(s) ~= 'string' or #s > 19 or not string.find(s, '^%d+$') then return nil end
  local tick, rem = 0, 0
  for i = 1, #s do
    rem = rem * 10 + string.byte(s, i) - 48 -- < 10 * 2^30
    local q = math.floor(rem / P)          -- 0..9
    rem = rem - q * P
    tick = tick * 10 + q
    if tick >= MAXTICK then return nil end
  end
  return {tick, rem}
end

-- format writes {tick, seq} as the decimal of tick * 2^bits + seq.
local function format(v)
  local tick, digits = v[1], {}
  repeat
    local d = tick % 10
    digits[#digits + 1] = d
    tick = (tick - d) / 10
  until tick == 0
  local out, carry = {}, v[2]
  for i = 1, #digits do
    local x = digits[i] * P + carry -- < 11 * 2^30
    local d = x % 10
    out[#out + 1] = d
    carry = (x - d) / 10
  end
  while carry > 0 do
    local d = carry % 10
    out[#out + 1] = d
    carry = (carry - d) / 10
  end
  while #out > 1 and out[#out] == 0 do out[#out] = nil end
  local s = {}
  for i = #out, 1, -1 do s[#s + 1] = string.char(48 + out[i]) end
  return table.concat(s)
end

local function less(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end
local function maxOf(a, b) if less(a, b) then return b end return a end
local function pred(a)
  if a[2] > 0 then return {a[1], a[2] - 1} end
  return {a[1] - 1, MASK}
end

local fleet = redis.call('GET', KEYS[2])
if fleet and fleet ~= ARGV[7] then
  return redis.error_reply('ERR counter.lua: layout ' .. ARGV[7] .. ' differs from the fleet layout ' .. fleet)
end
local nowMs, settleMs = math.floor(nowUs / 1000), tonumber(ARGV[13])
if not fleet then
  storeLayout(KEYS[2], KEYS[4], ARGV[7], lossID, nowMs, settleMs)
end
local settle = layoutWindow(KEYS[4], lossID, nowMs, settleMs)
if settle > nowMs then
  return {'SETTLE', T, math.floor((settle * 1000 - epochUs) / unitUs) + 1}
end
local fleetLead = tonumber(redis.call('HGET', KEYS[4], 'counter_lead') or -1)
if fleetLead < 0 then
  fleetLead = lead
  redis.call('HSET', KEYS[4], 'counter_lead', lead)
end
local reach, lossLead = math.min(lead, fleetLead), math.max(lead, fleetLead)

local minValue = parse(ARGV[6])
if not minValue then
  return redis.error_reply('ERR counter.lua: min value ' .. tostring(ARGV[6]) .. ' is not a counter value')
end
local stored = redis.call('GET', KEYS[1])
local cur
if stored then
  cur = parse(stored)
  if not cur then
    return redis.error_reply('ERR ' .. KEYS[1] .. ' holds "' .. stored .. '", not a counter value (a decimal below 2^63)')
  end
  cur = maxOf(maxOf(cur, {T - 1, MASK}), {lossTick + lossLead, MASK})
else
  cur = {math.max(T, lossTick) + lossLead, MASK}
end
cur = maxOf(cur, pred(minValue))
cur = maxOf(cur, {-1, MASK})

if not stored then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'type', 'counter_init', 'mid', ARGV[9],
    'host', ARGV[10], 'pid', ARGV[11], 'tick', T, 'value', format(cur),
    'detail', 'counter key missing (first use, or Redis lost its data): floored to Redis TIME + lead')
end

local first = {cur[1], cur[2] + 1}
if first[2] > MASK then first = {first[1] + 1, 0} end
local limit = T + reach
if first[1] > limit then
  if not stored and cur[1] >= 0 then redis.call('SET', KEYS[1], format(cur)) end
  return {'AHEAD', T, first[1]}
end
local s = first[2] + n - 1
local last = {first[1] + math.floor(s / P), s % P}
if last[1] > limit then last = {limit, MASK} end
local lastText = format(last)
redis.call('SET', KEYS[1], lastText)
local need, listed = replicasNeeded(KEYS[4])
return {'OK', format(first), lastText, T, need, listed}
