-- renew.lua: extend the leases of one owner and raise its reservation.
-- guard.lua runs first.
--
-- KEYS[1] {ns}:reserved KEYS[2] {ns}:events KEYS[3] {ns}:machines
-- KEYS[4] {ns}:meta KEYS[5] {ns}:layout
-- ARGV and reply: RenewArgs (renew.go).
--
-- Extends the leases held by the token and raises the reservation, never
-- past Redis TIME + the fleet's horizon. A missing lease is lost
-- ("expired"), never re-asserted; nothing is extended when the loss ID
-- changed since the owner's last renewal ("loss"). After a total loss the
-- owner restores {ns}:meta, with the fleet horizon it knew, and the layout
-- (guard.lua). Why: docs/design.md, Why the scripts are safe.
local prefix, token, ttl = A.prefix, A.token, A.ttl
local want, held, knownHorizon = tonumber(A.want), tonumber(A.held), tonumber(A.fleetHorizon)
local mode, host, pid, addr, version = A.mode, A.host, A.pid, A.addr, A.version
local layout, node, knownLoss = A.layout, A.node, A.lossID
local epochUs, unitUs = tonumber(A.epochUs), tonumber(A.tickUs)
local ids = list(A.ids)
local nowText, _, nowUs = redisNow()
local tick = tickOf(nowUs, epochUs, unitUs)

local _, lossMs, how, lossID = guard(KEYS[4], KEYS[2], {'token', token, 'host', host, 'pid', pid, 'addr', addr}, tick)
if how == 'created' then
  emit('dataloss', ids[1], 'generation', A.generation, 'detail', 'meta-missing')
end
local stored = fleetLayout(KEYS[5], layout)
if stored ~= layout then
  emit('renew_fail', ids[1], 'reason', 'layout', 'layout', layout, 'stored', stored)
  return {'LOST', ids[1], stored, '', 'layout', '', ''}
end
-- The fleet's horizon as this owner knew it, when {ns}:meta has none.
local metaHorizon = fleetValue(KEYS[4], 'horizon', math.max(tonumber(A.horizon), knownHorizon))
local cap = tick + metaHorizon

-- After a possible loss nothing is extended, and the lease is lost to the
-- loss whatever is left of it (a Redis restarted empty has none): what it
-- granted before stays its owner's to issue (node/drain.go).
if lossID ~= knownLoss then
  emit('renew_fail', ids[1], 'reason', 'loss', 'loss_ms', lossMs, 'held', held)
  return {'LOST', ids[1], '', '', 'loss', '', ''}
end

-- Check every ID first, so a lost one changes nothing.
for _, id in ipairs(ids) do
  local holder = redis.call('GET', prefix .. 'lease:' .. id)
  if not holder then
    emit('renew_fail', id, 'reason', 'expired', 'held', held)
    return {'LOST', id, '', '', 'expired', '', ''}
  elseif holder ~= token then
    local o = redis.call('HMGET', prefix .. 'owner:' .. id, 'from_token', 'host', 'pid')
    if o[1] == token then
      emit('fenced', id, 'holder', holder, 'holder_host', o[2] or '', 'holder_pid', o[3] or '')
      return {'LOST', id, '', holder, 'fenced', o[2] or '', o[3] or ''}
    end
    emit('renew_fail', id, 'reason', 'held', 'holder', holder)
    return {'LOST', id, '', holder, 'held', '', ''}
  end
end

local granted = nil
for _, id in ipairs(ids) do
  local owner = prefix .. 'owner:' .. id
  redis.call('PEXPIRE', prefix .. 'lease:' .. id, ttl)
  if redis.call('EXISTS', owner) == 0 then
    -- The owner data went away under a live lease (deleted by hand, or
    -- lost with a Redis failover): write it whole, not a partial hash.
    redis.call('HSET', owner, 'host', host, 'pid', pid, 'addr', addr, 'version', version,
      'token', token, 'state', 'live', 'claimed', nowText, 'first_claim', nowText, 'started', nowText,
      'node', node)
  end
  local r = tonumber(redis.call('HGET', KEYS[1], id) or -1)
  local nr = math.max(r, held, math.min(want, cap))
  if nr > r then redis.call('HSET', KEYS[1], id, nr) end
  redis.call('HSET', owner, 'heartbeat', nowText, 'mode', mode)
  if granted == nil or nr < granted then granted = nr end
end
local need, listed = replicasNeeded(KEYS[4])
return {'OK', granted, how, nowText, lossID, need, listed}
