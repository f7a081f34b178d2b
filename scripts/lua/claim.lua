-- claim.lua: atomically claim one machine ID. guard.lua runs first.
--
-- KEYS[1] {ns}:layout   KEYS[2] {ns}:meta   KEYS[3] {ns}:machines
-- KEYS[4] {ns}:reserved KEYS[5] {ns}:events
-- ARGV and reply: ClaimArgs (claim.go). The floor: docs/design.md, Why
-- the scripts are safe.
local prefix, token, layout, preferred, node, prevToken = A.prefix, A.token, A.layout, A.preferred, A.node, A.prevToken
local horizon, now, ttl = tonumber(A.horizon), tonumber(A.now), A.ttl
local localFloor, maxWait = tonumber(A.localFloor), tonumber(A.maxWait)
local epochUs, unitUs = tonumber(A.epochUs), tonumber(A.tickUs)
local host, pid, addr, mode = A.host, A.pid, A.addr, A.mode
local nowText, _, nowUs = redisNow()
local redisTick = tickOf(nowUs, epochUs, unitUs)

local gen, lossMs, how, lossID = guard(KEYS[2], KEYS[5], {'token', token, 'host', host, 'pid', pid, 'addr', addr}, redisTick)
local stored = fleetLayout(KEYS[1], layout)
if stored ~= layout then
  emit('layout_mismatch', '', 'layout', layout, 'stored', stored)
  return {'LAYOUT', stored}
end
local metaHorizon = fleetValue(KEYS[2], 'horizon', horizon)
local lossFloor = tickOf((lossMs + redisSkewMs) * 1000, epochUs, unitUs) + math.max(horizon, metaHorizon)

local function floorOf(id)
  local r = redis.call('HGET', KEYS[4], id)
  local floor = math.max(r and tonumber(r) or -1, lossFloor)
  if id == preferred then floor = math.max(floor, localFloor) end
  return floor
end

local skip = {[A.counterID] = true}
for _, id in ipairs(list(A.skip)) do skip[id] = true end
local minID, maxID = tonumber(A.minID), tonumber(A.maxID)
local cands = {}
local function candidate(id)
  local n = tonumber(id)
  if n and n >= minID and n <= maxID then cands[#cands + 1] = id end
end
for _, id in ipairs(list(A.candidates)) do candidate(id) end
for _, m in ipairs(redis.call('SRANDMEMBER', KEYS[3], 8)) do candidate(m) end

-- soonest: the lowest floor of a free candidate, which a NONE reply
-- returns (when the caller may start on it).
local best, bestFloor, bestHolder = nil, nil, nil
local clone, soonest = '', -1
for _, id in ipairs(cands) do
  if not skip[id] then
    local holder = redis.call('GET', prefix .. 'lease:' .. id)
    local ours = holder and prevToken ~= '' and holder == prevToken
    if not holder or ours then
      local floor = floorOf(id)
      if soonest < 0 or floor < soonest then soonest = floor end
      if ours or id == preferred or floor < now then
        best, bestFloor, bestHolder = id, floor, holder
        break
      end
      if maxWait >= 0 and floor - now <= maxWait and (bestFloor == nil or floor < bestFloor) then
        best, bestFloor, bestHolder = id, floor, holder
      end
    elseif id == preferred and node ~= '' then
      local o = redis.call('HMGET', prefix .. 'owner:' .. id, 'node', 'host', 'pid')
      if o[1] == node then
        clone = (o[2] or '') .. ' ' .. (o[3] or '')
        emit('clone', id, 'holder', holder, 'node', node, 'holder_host', o[2] or '', 'holder_pid', o[3] or '')
      end
    end
  end
end
if not best then return {'NONE', soonest} end

local id, floor = best, bestFloor
local ownerKey = prefix .. 'owner:' .. id
local prev = redis.call('HMGET', ownerKey, 'host', 'pid', 'addr', 'token', 'state')
local kind = 'claim'
if bestHolder or (prevToken ~= '' and prev[4] == prevToken) then
  kind = 'reclaim' -- this node's previous process: restarted, or a copy of it still runs
elseif prev[4] and prev[5] == 'live' then
  kind = 'takeover'
end
redis.call('SET', prefix .. 'lease:' .. id, token, 'PX', ttl)
redis.call('SADD', KEYS[3], id)
-- Always recorded, also a floor of -1 (a registry that lost nothing):
-- audit reads a live lease without a reservation as inconsistent.
local r = tonumber(redis.call('HGET', KEYS[4], id) or -2)
if floor > r then redis.call('HSET', KEYS[4], id, floor) end
-- From now on {ns}:reserved missing means it was evicted or deleted
-- (guard.lua).
redis.call('HSET', KEYS[2], 'reserved', '1')
local firstClaim = redis.call('HGET', ownerKey, 'first_claim') or nowText
redis.call('HSET', ownerKey, 'host', host, 'pid', pid, 'addr', addr, 'version', A.version,
  'started', nowText, 'heartbeat', nowText, 'mode', mode, 'token', token, 'state', 'live',
  'claimed', nowText, 'first_claim', firstClaim, 'floor', floor, 'node', node, 'from_token', prevToken)
redis.call('HDEL', ownerKey, 'released')
emit(kind, id, 'floor', floor, 'prev_host', prev[1] or '', 'prev_pid', prev[2] or '',
  'prev_addr', prev[3] or '', 'prev_token', prev[4] or '', 'mode', mode, 'fenced', bestHolder or '',
  'node', node, 'loss_floor', lossFloor)
local need, listed = replicasNeeded(KEYS[2])
return {'OK', id, floor, gen, kind, how == 'created' and 1 or 0, clone, nowText, metaHorizon, lossID, need, listed}
