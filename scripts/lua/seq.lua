-- seq.lua: named sequences, dense increasing integers per tag, handed out
-- in segments (NEXTSEQ). guard.lua runs first.
--
-- KEYS[1] {ns}:seqs KEYS[2] {ns}:events KEYS[3] {ns}:meta
-- ARGV and reply: SeqArgs (seq.go).
--
-- The tag's hash is {ns}:seq:<tag>; {ns}:seqs lists the tags. Values are
-- integers below 2^53, written with %d. Dense in normal operation: a
-- clean stop gives back what it did not use (into the free list, or
-- below high when it ends there). After a loss (another loss_id)
-- a tag jumps to its rate bound, high + tokens + rate x elapsed since
-- at_ms, taken at loss_ms + skew, or is blocked when that passes its max
-- jump (until flaked seq restore); a tag missing while known (listed, or
-- asked for with a caller's floor) fails closed the same way. Why:
-- docs/design.md, Why the scripts are safe.
--
-- segmentTTLMs: a node hands out a segment's values only this long after
-- asking for it, unless a check (op 'check') finds no loss since the
-- grant; Go reads it as seq.SegmentTTL. So by loss_ms + skew + TTL no
-- value granted before a loss is handed out any more, and a restore
-- (which trusts the operator's records) waits until then.
local segmentTTLMs = 10000
local prefix, op, tag = A.prefix, A.op, A.tag
local key = prefix .. 'seq:' .. tag
local freeMax = 64
local LIMIT = 2 ^ 53 - 1

local _, lossMs, _, lossID = guard(KEYS[3], KEYS[2], {'tag', tag, 'host', A.host, 'pid', A.pid})
local nowText, nowMs = redisNow()

local function I(x) return string.format('%d', x) end
local function num(s) return tonumber(s or 0) or 0 end

-- The free list: "a-b,c-d", ascending, disjoint, not adjacent.
local function readFree(s)
  local out = {}
  for a, b in string.gmatch(s or '', '(%d+)-(%d+)') do out[#out + 1] = {tonumber(a), tonumber(b)} end
  return out
end
local function writeFree(f)
  local parts = {}
  for i = 1, #f do parts[i] = I(f[i][1]) .. '-' .. I(f[i][2]) end
  return table.concat(parts, ',')
end
local function freeCount(f)
  local c = 0
  for i = 1, #f do c = c + f[i][2] - f[i][1] + 1 end
  return c
end

-- token is what a segment granted now is checked and given back with:
-- the loss ID and the tag's epoch, which every create and restore takes
-- anew ({ns}:meta seq_epochs), so a segment from before a loss or a
-- restore is neither renewed nor given back (its values stay its own).
local function token(t) return lossID .. '#' .. (t.epoch or '') end
local function newEpoch()
  local e = I(num(redis.call('HGET', KEYS[3], 'seq_epochs')) + 1)
  redis.call('HSET', KEYS[3], 'seq_epochs', e)
  return e
end

-- missingSince is when a script first found the tag's hash gone while the
-- tag was known (lost, evicted or deleted), kept in {ns}:meta until a
-- restore: a segment granted before is handed out at most a TTL past it.
local missingField = 'seq_missing:' .. tag
local function missingSince()
  local since = tonumber(redis.call('HGET', KEYS[3], missingField) or '')
  if since then return since end
  redis.call('HSET', KEYS[3], missingField, nowText)
  return nowMs
end
local function known()
  return redis.call('SISMEMBER', KEYS[1], tag) == 1 or redis.call('HGET', KEYS[3], missingField)
end

local function load()
  local h = redis.call('HGETALL', key)
  if #h == 0 then return nil end
  local r = {}
  for i = 1, #h, 2 do r[h[i]] = h[i + 1] end
  return r
end

-- refill adds the tokens earned since at_ms, up to burst.
local function refill(r)
  local rate, burst = num(r.rate), num(r.burst)
  local dt = math.max(0, nowMs - num(r.at_ms))
  return math.min(burst, num(r.tokens) + rate * dt / 1000)
end

local function create(start, above)
  local step, mx, rate, burst, mj = tonumber(A.step), tonumber(A.max), tonumber(A.rate),
    tonumber(A.burst), tonumber(A.maxJump)
  if not (start and step and mx and rate and burst and mj) or start < 1 or start > LIMIT or step < 1
    or rate <= 0 or burst < 1 or (mx ~= 0 and mx < start) or mx > LIMIT or mj < 0 then
    fail('INVALID', 'seq.lua: bad options for tag ' .. tag)
  end
  local high = math.max(start - 1, above or 0)
  redis.call('HSET', key, 'start', I(start), 'step', I(step), 'max', I(mx), 'rate', I(rate),
    'burst', I(burst), 'max_jump', I(mj), 'high', I(high), 'tokens', I(burst), 'at_ms', nowText,
    'loss_id', lossID, 'free', '', 'given_back', '0', 'lost', '0', 'jumps', '0', 'grants', '0',
    'created_ms', nowText, 'epoch', newEpoch())
  redis.call('HDEL', KEYS[3], missingField)
  redis.call('SADD', KEYS[1], tag)
  emit('seq_create', '', 'start', I(start), 'step', I(step), 'max', I(mx), 'value', I(high))
  return {'OK', I(high)}
end

if op == 'create' then
  if redis.call('EXISTS', key) == 1 then return {'EXISTS'} end
  if known() then -- made before and lost: only a restore may bring it back
    missingSince()
    return {'LOST', '0'}
  end
  return create(tonumber(A.start), 0)
end

local r = load()

if op == 'restore' then
  local above = tonumber(A.above)
  if not above or above < 0 or above >= LIMIT then
    fail('INVALID', 'seq.lua: restore above ' .. tostring(A.above) .. ' is not a value')
  end
  -- Trusting the operator's records (instead of the rate bound) is safe
  -- only once no segment granted before the loss, or before the tag went
  -- missing, can be handed out.
  if not r or r.blocked or r.loss_id ~= lossID then
    local since = r and lossMs or math.max(lossMs, missingSince())
    local ready = since + redisSkewMs + segmentTTLMs
    if nowMs < ready then return {'WAIT', I(ready - nowMs), I(since)} end
  end
  if not r then return create(math.max(tonumber(A.start) or 1, above + 1), above) end
  local high = math.max(num(r.high), above)
  -- No tokens: a restore adds no values above the rate to what a copy
  -- from before it bounds.
  redis.call('HSET', key, 'high', I(high), 'loss_id', lossID, 'free', '', 'tokens', '0',
    'at_ms', I(math.max(nowMs, num(r.at_ms))), 'lost', I(num(r.lost) + freeCount(readFree(r.free))),
    'epoch', newEpoch())
  redis.call('HDEL', key, 'blocked')
  redis.call('SADD', KEYS[1], tag)
  emit('seq_restore', '', 'value', I(high), 'above', I(above))
  return {'OK', I(high)}
end

local floor = tonumber(A.floor) or 0

if not r then
  if floor > 0 or known() then
    missingSince()
    emit('seq_lost', '', 'value', I(floor))
    return {'LOST', I(floor)}
  end
  return {'UNKNOWN'}
end

if op == 'check' then
  -- A segment granted under A.lossID may be handed out for another TTL
  -- only if Redis lost nothing since and the tag is the one it came from.
  if A.lossID == token(r) and not r.blocked then return {'OK'} end
  return {'GONE'}
end

if op == 'giveback' then
  local first, last = tonumber(A.first), tonumber(A.last)
  if not first or not last or first < 1 or last > LIMIT then
    fail('INVALID', 'seq.lua: give-back range ' .. tostring(A.first) .. '-' .. tostring(A.last))
  end
  local count = last - first + 1
  if count <= 0 then return {'OK', '0', 'high'} end
  if A.lossID ~= token(r) or r.blocked then
    -- Redis may have lost writes since these were granted, or the tag
    -- was restored: someone may hold them now. They stay unused.
    redis.call('HSET', key, 'lost', I(num(r.lost) + count))
    return {'OK', '0', 'lost'}
  end
  local high = num(r.high)
  if last > high then
    fail('INVALID', 'seq.lua: give-back of ' .. I(first) .. '-' .. I(last) .. ' above high ' .. I(high))
  end
  -- Into the free list, merged with its neighbours; a range that then
  -- ends at high lowers high instead, its values back in the bucket (high
  -- + tokens never grows, which the loss jump's bound counts on).
  local free = readFree(r.free)
  free[#free + 1] = {first, last}
  table.sort(free, function(a, b) return a[1] < b[1] end)
  local merged = {}
  for _, f in ipairs(free) do
    local m = merged[#merged]
    if m and f[1] <= m[2] + 1 then m[2] = math.max(m[2], f[2]) else merged[#merged + 1] = f end
  end
  local lowered = merged[#merged][2] == high
  if lowered then
    high = merged[#merged][1] - 1
    merged[#merged] = nil
  elseif #merged > freeMax then
    redis.call('HSET', key, 'lost', I(num(r.lost) + count))
    return {'OK', '0', 'lost'}
  end
  redis.call('HSET', key, 'high', I(high), 'free', writeFree(merged),
    'tokens', I(math.min(num(r.burst), math.floor(refill(r) + num(r.high) - high))), 'at_ms', I(math.max(nowMs, num(r.at_ms))),
    'given_back', I(num(r.given_back) + count))
  return {'OK', I(count), lowered and 'high' or 'free'}
end

if op ~= 'next' then
  fail('INVALID', 'seq.lua: unknown op ' .. tostring(op))
end

if r.blocked then return {'BLOCKED', r.blocked} end

local high, lost = num(r.high), num(r.lost)
-- at is the bucket's time: never moved back (a jump sets it ahead).
local at = math.max(nowMs, num(r.at_ms))
local free = readFree(r.free)
local tokens = refill(r)
local jumps = num(r.jumps)
-- top: the tag's maximum, or the highest value a double holds exactly.
local top = num(r.max) > 0 and num(r.max) or LIMIT

if r.loss_id ~= lossID then
  -- Redis lost writes since the tag was last written: continue above the
  -- most it can have granted since this copy.
  local dt = math.max(0, lossMs + redisSkewMs - num(r.at_ms))
  local bound = high + math.ceil(num(r.tokens) + num(r.rate) * dt / 1000)
  bound = math.max(bound, floor)
  local jump = bound - high
  local mj = num(r.max_jump)
  if mj > 0 and jump > mj then
    local reason = table.concat({'jump', lossID, I(jump), I(high), I(mj)}, ' ')
    redis.call('HSET', key, 'blocked', reason)
    emit('seq_blocked', '', 'value', I(high), 'detail', reason)
    return {'BLOCKED', reason}
  end
  bound = math.min(bound, top)
  lost = lost + math.max(0, bound - high) + freeCount(free)
  emit('seq_jump', '', 'value', I(bound), 'previous', I(high), 'loss_id', lossID,
    'detail', 'rate bound')
  high = math.max(high, bound)
  free = {}
  jumps = jumps + 1
  -- No tokens, and none earned before loss_ms + skew: every later grant
  -- happens at a time t past that and stays within the copy's bound at t,
  -- so a later rollback to the same copy bounds it too. The tag's first
  -- segment after a loss waits for that moment (as the counter's does).
  tokens = 0
  at = math.max(at, lossMs + redisSkewMs)
end
if floor > high then
  -- This process holds values the copy lost: raise the tag above them.
  lost = lost + floor - high
  high = floor
end

local function save()
  redis.call('HSET', key, 'high', I(high), 'free', writeFree(free), 'tokens', string.format('%.3f', tokens),
    'at_ms', I(at), 'loss_id', lossID, 'lost', I(lost), 'jumps', I(jumps), 'grants', I(num(r.grants) + 1))
end

-- grant saves the tag and replies with first..last and, as every grant
-- does, the count of replicas that must acknowledge it before it is used
-- and the replicas listed (replicas.lua; internal/replwait reads them).
local function grant(first, last)
  save()
  local need, listed = replicasNeeded(KEYS[3])
  return {'OK', I(first), I(last), token(r), I(num(r.step)), I(need), listed}
end

local n = tonumber(A.n) or 0
if n <= 0 then n = num(r.step) end

-- A range given back, above the caller's floor, first.
for i = 1, #free do
  local f = free[i]
  if f[1] > floor then
    local first, last = f[1], math.min(f[2], f[1] + n - 1)
    if last == f[2] then table.remove(free, i) else f[1] = last + 1 end
    return grant(first, last)
  end
end

if high >= top then
  save()
  return {'MAX', I(top)}
end
if tokens < 1 then
  save()
  return {'RATE', I(math.max(1, at - nowMs + math.ceil((1 - tokens) * 1000 / num(r.rate))))}
end
local k = math.min(n, math.floor(tokens), top - high)
tokens = tokens - k
high = high + k
return grant(high - k + 1, high)
