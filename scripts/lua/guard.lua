-- guard.lua: the start of every script that writes the registry or the
-- counter; lua.go puts it in front, so the check runs in the same atomic
-- call as the write. It notices that Redis may have lost acknowledged
-- writes (a new run_id or master_replid) and refuses to write when it
-- cannot tell (docs/design.md, Why the scripts are safe). Refusals start
-- "UNSAFE <check>:" (lua.UnsafeCheck reads them).

-- redisSkewMs: how far apart the clocks of one deployment's Redis
-- servers may be; floors after a loss add it. Go: lua.RedisSkew.
local redisSkewMs = 1000

-- redisNow is Redis TIME in ms (text and number) and in us.
local function redisNow()
  local t = redis.call('TIME')
  local ms = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
  return tostring(ms), ms, tonumber(t[1]) * 1e6 + tonumber(t[2])
end

-- unsafe ends the script with an error reply, before any write.
local function unsafe(check, msg)
  error({err = 'UNSAFE ' .. check .. ': ' .. msg})
end

local optOut = ' (or, for a server that truly hides INFO, start the node with --redis-identity=none,'
  .. ' which turns off the detection of Redis losing writes and this check)'

-- guardInfo is the INFO text serverInfo read ('' with identity none):
-- one INFO call per script, which a narrowed ACL rule would refuse twice.
local guardInfo = ''

-- infoField is one field of the INFO text the guard read, or nil.
local function infoField(field)
  return string.match(guardInfo, field .. ':(%w+)')
end

local function serverInfo(identity)
  if identity == 'none' then return '', '' end
  local info = redis.pcall('INFO', 'server', 'replication', 'memory')
  if type(info) ~= 'string' then
    local e = type(info) == 'table' and tostring(info.err) or tostring(info)
    if string.find(string.lower(e), 'unknown', 1, true) then
      unsafe('identity', 'INFO is not a command on this Redis (' .. e .. '): it was renamed or disabled with'
        .. ' rename-command; remove rename-command INFO from its configuration, flaked reads run_id,'
        .. ' master_replid and maxmemory_policy with it' .. optOut)
    end
    unsafe('identity', 'INFO server replication memory refused (' .. e .. '): grant the node\'s Redis user'
      .. ' +info (deploy/redis/acl.conf), flaked reads run_id, master_replid and maxmemory_policy with it' .. optOut)
  end
  local run, repl = string.match(info, 'run_id:(%w+)'), string.match(info, 'master_replid:(%w+)')
  if not run or not repl then
    unsafe('identity', 'INFO shows no ' .. (run and 'master_replid' or 'run_id') .. ' (a proxy in front of Redis?):'
      .. ' flaked cannot notice this Redis losing writes; connect the node to Redis itself' .. optOut)
  end
  local policy = string.match(info, 'maxmemory_policy:(%w+)')
  if policy == 'allkeys' then
    unsafe('eviction', 'maxmemory-policy ' .. string.match(info, 'maxmemory_policy:([%w-]+)')
      .. ' may evict the registry\'s keys (meta, reservations, layout): set it to noeviction or a volatile-* policy'
      .. ' (CONFIG SET maxmemory-policy noeviction, and in redis.conf)')
  elseif not policy then
    unsafe('eviction', 'INFO memory shows no maxmemory_policy: flaked cannot tell whether Redis may evict the'
      .. ' registry\'s keys; connect the node to Redis itself' .. optOut)
  end
  guardInfo = info
  return run .. ':' .. repl, info
end

-- listedReplicas: the replicas listed now, where {ns}:meta's mark starts.
local function listedReplicas()
  return tonumber(infoField('connected_slaves') or '0') or 0
end

-- replicasAfterChange: the mark once this server took the registry over
-- from previous (run_id:replid): one less for a replica promoted in its
-- place, the same after a restart (replicas.lua).
local function replicasAfterChange(meta, previous)
  local mark = tonumber(redis.call('HGET', meta, 'replicas') or '0') or 0
  local prevRepl = previous and string.match(previous, ':(%w+)$')
  if prevRepl and infoField('master_replid2') == prevRepl then
    mark = mark - 1
  end
  return math.max(listedReplicas(), mark)
end

-- guard checks {ns}:meta against this server; gen and created: what to
-- make {ns}:meta with when it is missing; ev: the writer's event fields.
-- Returns generation, loss_ms, how ('' | 'created' | 'server'), loss_id
-- (this server and the time of the last possible loss). {ns}:reserved
-- gone while {ns}:meta says a claim wrote it counts as a loss.
local function guard(meta, events, maxlen, gen, created, ev, identity)
  local nowText, nowMs = redisNow()
  local id = serverInfo(identity)
  local lossID = id .. '@' .. nowText
  local m = redis.call('HMGET', meta, 'generation', 'server', 'loss_ms', 'loss_id', 'reserved')
  if not m[1] then
    redis.call('HSET', meta, 'generation', gen, 'created_ms', nowText, 'server', id,
      'loss_ms', nowText, 'loss_id', lossID, 'replicas', listedReplicas(), unpack(created))
    return gen, nowMs, 'created', lossID
  end
  local evicted = m[5] and redis.call('EXISTS', string.sub(meta, 1, -5) .. 'reserved') == 0
  if m[2] == id and not evicted then
    return m[1], tonumber(m[3] or 0), '', m[4] or ''
  end
  -- Never lower loss_ms: a new master's clock may be behind the old one's.
  local lossMs = math.max(tonumber(m[3] or 0), nowMs)
  redis.call('HSET', meta, 'server', id, 'loss_ms', tostring(lossMs), 'loss_id', lossID,
    'replicas', replicasAfterChange(meta, m[2]))
  local detail = 'Redis server changed (restart or failover): writes acknowledged before may be lost; '
    .. 'claims start a horizon later and the counter a lead later'
  if m[2] == id then
    redis.call('HDEL', meta, 'reserved') -- the next claim writes both again
    detail = 'the reservations ({ns}:reserved) are gone under the same server (evicted under an allkeys-* policy,'
      .. ' or deleted): treated as a loss; claims start a horizon later and the counter a lead later'
  end
  redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'type', 'dataloss', 'mid', '',
    'server', id, 'previous_server', m[2] or '', 'detail', detail, unpack(ev))
  return m[1], lossMs, 'server', lossID
end

-- tickOf converts Redis milliseconds to a tick of the layout.
local function tickOf(ms, epochUs, unitUs)
  return math.floor((ms * 1000 - epochUs) / unitUs)
end
