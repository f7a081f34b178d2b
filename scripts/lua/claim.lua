-- claim.lua: atomically claim one machine ID.
--
-- KEYS[1] {ns}:layout   KEYS[2] {ns}:meta   KEYS[3] {ns}:machines
-- KEYS[4] {ns}:reserved KEYS[5] {ns}:events
-- ARGV: 1 key prefix "{ns}:", 2 owner token, 3 canonical layout,
--   4 generation to create the registry with, 5 horizon (ticks),
--   6 the claimer's clock (tick), 7 lease ttl (ms), 8 events maxlen,
--   9 preferred ID ("" for none), 10 local floor of the preferred ID,
--   11 max wait (ticks): a non-preferred ID whose floor is further ahead
--      of the claimer's clock is not taken; -1 means only IDs startable now,
--   12 epoch (us since the Unix epoch), 13 tick length (us),
--   14 counter machine ID (never leased), 15 host, 16 pid, 17 addr,
--   18 version, 19 mode, 20 IDs to skip (comma separated: the ones this
--   owner already claimed in the same call), 21.. candidate IDs.
-- Every lease and owner key shares the {ns} hash tag with KEYS, so the
-- script runs unchanged on Redis Cluster.
--
-- Returns {"OK", id, floor, generation, event, created} |
--         {"LAYOUT", stored layout} | {"NONE", lowest floor seen or -1}.
-- The cost is bounded by the candidates passed plus 8 random members of
-- the registry: it never scans the machine-ID space.
local prefix, token, layout = ARGV[1], ARGV[2], ARGV[3]
local horizon, now, ttl, maxlen = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8]
local preferred, localFloor, maxWait = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])
local epochUs, unitUs, counterID = tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[14]
local host, pid, addr, version, mode = ARGV[15], ARGV[16], ARGV[17], ARGV[18], ARGV[19]

local t = redis.call('TIME')
local nowMs = tostring(math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000))
local redisTick = math.floor((tonumber(t[1]) * 1e6 + tonumber(t[2]) - epochUs) / unitUs)

local function event(kind, id, ...)
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxlen, '*', 'type', kind, 'mid', id,
    'token', token, 'host', host, 'pid', pid, 'addr', addr, ...)
end

local stored = redis.call('GET', KEYS[1])
if stored and stored ~= layout then
  event('layout_mismatch', '', 'layout', layout, 'stored', stored)
  return {'LAYOUT', stored}
end
local created = false
if not stored then
  redis.call('SET', KEYS[1], layout)
end
local gen = redis.call('HGET', KEYS[2], 'generation')
if not gen then
  gen = ARGV[4]
  created = true
  redis.call('HSET', KEYS[2], 'generation', gen, 'created_ms', nowMs,
    'created_tick', redisTick, 'horizon', horizon)
end
-- A registry that was (re)created at tick C may have lost reservations up
-- to C + horizon: an ID without a reservation record starts after that.
local metaHorizon = tonumber(redis.call('HGET', KEYS[2], 'horizon') or horizon)
local unknownFloor = tonumber(redis.call('HGET', KEYS[2], 'created_tick')) + math.max(horizon, metaHorizon)

local skip = {[counterID] = true}
for id in string.gmatch(ARGV[20], '[^,]+') do skip[id] = true end
local cands = {}
for i = 21, #ARGV do cands[#cands + 1] = ARGV[i] end
for _, m in ipairs(redis.call('SRANDMEMBER', KEYS[3], 8)) do cands[#cands + 1] = m end

local best, bestFloor, bestHolder = nil, nil, nil
for _, id in ipairs(cands) do
  if not skip[id] then
    local holder = redis.call('GET', prefix .. 'lease:' .. id)
    if not holder or holder == token then
      local r = redis.call('HGET', KEYS[4], id)
      local floor = r and tonumber(r) or unknownFloor
      local isPreferred = (id == preferred)
      if isPreferred then floor = math.max(floor, localFloor) end
      if holder == token or isPreferred or floor < now then
        best, bestFloor, bestHolder = id, floor, holder
        break
      end
      if maxWait >= 0 and floor - now <= maxWait and (bestFloor == nil or floor < bestFloor) then
        best, bestFloor, bestHolder = id, floor, holder
      end
    end
  end
end
if not best then
  -- Tell the caller when the soonest free candidate becomes startable.
  local soonest = -1
  for _, id in ipairs(cands) do
    if not skip[id] and redis.call('EXISTS', prefix .. 'lease:' .. id) == 0 then
      local r = redis.call('HGET', KEYS[4], id)
      local floor = r and tonumber(r) or unknownFloor
      if soonest < 0 or floor < soonest then soonest = floor end
    end
  end
  return {'NONE', soonest}
end

local id, floor = best, bestFloor
local ownerKey = prefix .. 'owner:' .. id
local kind = 'claim'
if bestHolder == token then
  kind = 'reclaim'
else
  local prevToken = redis.call('HGET', ownerKey, 'token')
  local prevState = redis.call('HGET', ownerKey, 'state')
  if prevToken and prevToken ~= token and prevState == 'live' then
    kind = 'takeover'
  end
end
local prev = redis.call('HMGET', ownerKey, 'host', 'pid', 'addr', 'token')
redis.call('SET', prefix .. 'lease:' .. id, token, 'PX', ttl)
redis.call('SADD', KEYS[3], id)
local r = tonumber(redis.call('HGET', KEYS[4], id) or -1)
if floor > r then redis.call('HSET', KEYS[4], id, floor) end
local firstClaim = redis.call('HGET', ownerKey, 'first_claim') or nowMs
redis.call('HSET', ownerKey, 'host', host, 'pid', pid, 'addr', addr, 'version', version,
  'started', nowMs, 'heartbeat', nowMs, 'mode', mode, 'token', token, 'state', 'live',
  'claimed', nowMs, 'first_claim', firstClaim, 'floor', floor)
redis.call('HDEL', ownerKey, 'released')
event(kind, id, 'floor', floor, 'prev_host', prev[1] or '', 'prev_pid', prev[2] or '',
  'prev_addr', prev[3] or '', 'prev_token', prev[4] or '', 'mode', mode)
return {'OK', id, floor, gen, kind, created and 1 or 0}
