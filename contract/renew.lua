-- renew.lua: extend the leases of one owner and raise its reservation.
-- guard.lua runs first.
--
-- KEYS[1] {ns}:reserved KEYS[2] {ns}:events KEYS[3] {ns}:machines
-- KEYS[4] {ns}:meta KEYS[5] {ns}:layout
-- ARGV (name = value; args.lua): prefix = key prefix; token; want =
--   reservation wanted (tick); held = reservation the owner holds now
--   (tick); ttl = lease ttl (ms); maxlen = events maxlen; mode, host, pid,
--   addr, version = the owner's; layout = canonical layout; generation =
--   the registry generation the lease was claimed in; horizon = ticks;
--   epochUs, tickUs = epoch and tick length (us); node = node ID; lossID =
--   the loss ID (guard.lua) this owner saw at its last claim or renewal;
--   fleetHorizon = the fleet horizon this owner knew at its claim;
--   identity = "info" or "none" (guard.lua); ids = machine IDs.
--
-- Extends the leases held by the token and raises the reservation, never
-- past Redis TIME + the fleet's horizon. A missing lease is lost
-- ("expired"), never re-asserted; nothing is extended when the loss ID
-- changed since the owner's last renewal ("loss"). After a total loss the
-- owner restores {ns}:meta and the layout; while a layout stored after a
-- loss settles, an owner from before it restores its own (layout.lua).
-- Why: docs/design.md, Why the scripts are safe.
--
-- Returns {"OK", reservation, data loss ("" | "created" | "server"),
-- Redis time (ms), loss ID, replicas needed, replicas listed} or {"LOST",
-- id, the stored layout (kind "layout") or "", holder, kind ("expired" |
-- "fenced": taken over by a copy of our state file | "layout" | "loss" |
-- "held"), holder host, holder pid}; lua.LostText words each kind.
local A = args()
local prefix, token, ttl, maxlen = A.prefix, A.token, A.ttl, A.maxlen
local want, held, knownHorizon = tonumber(A.want), tonumber(A.held), tonumber(A.fleetHorizon)
local mode, host, pid, addr, version = A.mode, A.host, A.pid, A.addr, A.version
local layout, generation, horizon, node, knownLoss = A.layout, A.generation, A.horizon, A.node, A.lossID
local epochUs, unitUs = tonumber(A.epochUs), tonumber(A.tickUs)
local ids = list(A.ids)
local nowText, nowNum, nowUs = redisNow()
local who = {'token', token, 'host', host, 'pid', pid, 'addr', addr}

local function event(kind, id, ...)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', 'type', kind, 'mid', id,
    'token', token, 'host', host, 'pid', pid, 'addr', addr, ...)
end

local gen, lossMs, how, lossID = guard(KEYS[4], KEYS[2], maxlen, generation,
  {'created_tick', math.floor((nowUs - epochUs) / unitUs), 'horizon', horizon}, who, A.identity)
if how == 'created' then
  event('dataloss', ids[1], 'generation', generation,
    'detail', 'meta-missing')
end
local stored = redis.call('GET', KEYS[5])
local settle, storedUnder, current = layoutWindow(KEYS[4], lossID, nowNum, 0)
-- An owner from before the loss after which a claim stored the layout,
-- while the layout's window is open (layout.lua).
local before = settle > nowNum and gen ~= generation and (storedUnder == nil or storedUnder == lossID)
-- An owner that renewed under the loss ID the layout was stored under, so
-- held its leases through that window and restored its layout then: Redis
-- has gone back to a copy made in the window (layout.lua), and the node
-- that stored this layout was refused.
local through = storedUnder ~= nil and storedUnder == knownLoss and storedUnder ~= lossID
  and (not current or settle > nowNum)
if not stored then
  redis.call('SET', KEYS[5], layout)
  event('layout_restored', ids[1], 'layout', layout, 'detail', 'fleet layout missing: restored by an owner holding leases')
elseif stored ~= layout then
  if before or through then
    overrideLayout(KEYS[5], KEYS[4], layout)
    local detail = 'a claim stored another layout after Redis lost its data; restored by an owner holding leases from before'
    if through then
      detail = 'Redis went back to a copy holding a layout this owner had already refused; restored again'
    end
    event('layout_restored', ids[1], 'layout', layout, 'refused', stored, 'detail', detail)
  else
    event('renew_fail', ids[1], 'reason', 'layout', 'layout', layout, 'stored', stored)
    return {'LOST', ids[1], stored, '', 'layout', '', ''}
  end
end
local metaHorizon = tonumber(redis.call('HGET', KEYS[4], 'horizon') or -1)
if metaHorizon < 0 then
  metaHorizon = tonumber(horizon)
  redis.call('HSET', KEYS[4], 'horizon', metaHorizon)
end
if (before or through) and knownHorizon > metaHorizon then
  metaHorizon = knownHorizon
  redis.call('HSET', KEYS[4], 'horizon', metaHorizon)
end
local cap = math.floor((nowUs - epochUs) / unitUs) + metaHorizon

-- Check every ID first, so a lost one changes nothing.
for _, id in ipairs(ids) do
  local holder = redis.call('GET', prefix .. 'lease:' .. id)
  if not holder then
    event('renew_fail', id, 'reason', 'expired', 'held', held)
    return {'LOST', id, '', '', 'expired', '', ''}
  elseif holder ~= token then
    local o = redis.call('HMGET', prefix .. 'owner:' .. id, 'from_token', 'host', 'pid')
    if o[1] == token then
      event('fenced', id, 'holder', holder, 'holder_host', o[2] or '', 'holder_pid', o[3] or '')
      return {'LOST', id, '', holder, 'fenced', o[2] or '', o[3] or ''}
    end
    event('renew_fail', id, 'reason', 'held', 'holder', holder)
    return {'LOST', id, '', holder, 'held', '', ''}
  end
end
if lossID ~= knownLoss then
  event('renew_fail', ids[1], 'reason', 'loss', 'loss_ms', lossMs, 'held', held)
  return {'LOST', ids[1], '', '', 'loss', '', ''}
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
