-- guard.lua: the start of every script that writes the registry or the
-- counter (claim, renew, release, counter). lua.go puts it in front of
-- each of them, so the check runs in the same atomic call as the write.
--
-- Redis can lose acknowledged writes and not know it: a replica promoted
-- before it received the last writes, a restart from an RDB snapshot or an
-- AOF written with appendfsync everysec, a restored backup. {ns}:meta
-- survives all of these, so its presence proves nothing. What changes
-- every time is the server's identity: a restart gives a new run_id, a
-- promotion a new master_replid. {ns}:meta records the identity it was
-- last written under; a script that runs under another one (or finds
-- {ns}:meta gone) records the moment in loss_ms. Every tick any node was
-- granted before that moment is at most loss_ms + the fleet's horizon,
-- and every counter value at most loss_ms + the counter's lead, so claims
-- start after the first and counter segments after the second (claim.lua,
-- counter.lua) however old the reservations and the counter read here
-- are. The cost is a wait of about one horizon for claims right after a
-- restart or failover, also a clean one: Redis cannot tell them apart.
--
-- A server whose INFO has no run_id or master_replid (miniredis, some
-- proxies) has identity '' and changes are not seen: the README says so.

-- redisSkewMs is how far apart the clocks of the Redis servers of one
-- deployment (a master and the replicas that may replace it) are assumed
-- to be at most. Floors after a loss start this much later: a new master
-- whose clock is behind the old one's reads an earlier loss_ms than the
-- TIME the old one granted by (found by the simulator). Go reads it as
-- lua.RedisSkew (lua.go).
local redisSkewMs = 1000

-- nowMs is Redis TIME in milliseconds, as a decimal string and a number.
local function redisNow()
  local t = redis.call('TIME')
  local ms = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
  return tostring(ms), ms, tonumber(t[1]) * 1e6 + tonumber(t[2])
end

local function infoField(section, field)
  local info = redis.pcall('INFO', section)
  if type(info) ~= 'string' then return nil end
  return string.match(info, field .. ':(%w+)')
end

-- serverIdentity names this server process and its replication history.
local function serverIdentity()
  local run, repl = infoField('server', 'run_id'), infoField('replication', 'master_replid')
  if not run or not repl then return '' end
  return run .. ':' .. repl
end

-- listedReplicas is how many replicas this server lists now (0 when INFO
-- cannot tell): where the fleet's replicas high-water mark starts when
-- {ns}:meta is made (replicas.lua).
local function listedReplicas()
  return tonumber(infoField('replication', 'connected_slaves') or '0') or 0
end

-- replicasAfterChange is the replicas high-water mark once this server
-- took the registry over from the one named previous (run_id:replid): a
-- replica promoted in its place (master_replid2, the history it was
-- following, is previous's replid) leaves the replicas the grants must
-- reach, the others stay until they follow this one or an operator lowers
-- the mark; after a restart (or anything else) the mark stays, so a
-- restarted master cut off from its replicas grants nothing (replicas.lua).
local function replicasAfterChange(meta, previous)
  local mark = tonumber(redis.call('HGET', meta, 'replicas') or '0') or 0
  local prevRepl = previous and string.match(previous, ':(%w+)$')
  if prevRepl and infoField('replication', 'master_replid2') == prevRepl then
    mark = mark - 1
  end
  return math.max(listedReplicas(), mark)
end

-- guard checks {ns}:meta against this server. meta, events: keys; gen:
-- the generation to create {ns}:meta with when it is missing; created: its
-- other fields then (a flat list); ev: the writer's event fields.
-- Returns generation, loss_ms (number), how ('' | 'created' | 'server'),
-- loss_id. loss_id names the last possible loss (this server's identity
-- and the time): an owner that saw another one at its last renewal knows
-- Redis may have lost writes since, whatever the clocks of the two
-- servers say (renew.lua).
local function guard(meta, events, maxlen, gen, created, ev)
  local nowText, nowMs = redisNow()
  local id = serverIdentity()
  local lossID = id .. '@' .. nowText
  local m = redis.call('HMGET', meta, 'generation', 'server', 'loss_ms', 'loss_id')
  if not m[1] then
    redis.call('HSET', meta, 'generation', gen, 'created_ms', nowText, 'server', id,
      'loss_ms', nowText, 'loss_id', lossID, 'replicas', listedReplicas(), unpack(created))
    return gen, nowMs, 'created', lossID
  end
  if m[2] == id then
    return m[1], tonumber(m[3] or 0), '', m[4] or ''
  end
  -- Never lower loss_ms: a new master's clock may be behind the old one's.
  local lossMs = math.max(tonumber(m[3] or 0), nowMs)
  redis.call('HSET', meta, 'server', id, 'loss_ms', tostring(lossMs), 'loss_id', lossID,
    'replicas', replicasAfterChange(meta, m[2]))
  local detail = 'Redis server changed (restart or failover): writes acknowledged before may be lost; '
    .. 'claims start a horizon later and the counter a lead later'
  redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'type', 'dataloss', 'mid', '',
    'server', id, 'previous_server', m[2] or '', 'detail', detail, unpack(ev))
  return m[1], lossMs, 'server', lossID
end

-- tickOf converts Redis milliseconds to a tick of the layout.
local function tickOf(ms, epochUs, unitUs)
  return math.floor((ms * 1000 - epochUs) / unitUs)
end
