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
-- Fail closed. The identity and the eviction policy come from one call,
-- INFO server replication memory (Redis 7 takes several sections: about
-- 10 us of server time, against 11.5 for three calls). A server that
-- refuses it (ACL: Redis checks a rule +info|<section> against the first
-- section only, so +info or +info|server passes), does not know INFO
-- (rename-command) or shows no run_id or master_replid refuses the write
-- with an error naming the cause and the fix: reading '' there would turn
-- the detection off in silence. So does a maxmemory-policy allkeys-*: it
-- may evict {ns}:meta, reservations and the layout, whatever maxmemory
-- says now (it can be set live). volatile-* evicts only keys with a TTL,
-- the leases, and an evicted lease reads as an expired one: its ID is
-- taken over above its reservation. The errors start "UNSAFE <check>:"
-- (lua.UnsafeCheck reads them). The scripts' identity argument "none" is
-- an operator's opt-in for servers that truly hide INFO: no INFO is read,
-- the identity is '' and neither a restart, a failover nor the eviction
-- policy is seen (the standalone node's embedded store sets it: nobody
-- else writes there).

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

-- unsafe ends the script with an error reply, before any write.
local function unsafe(check, msg)
  error({err = 'UNSAFE ' .. check .. ': ' .. msg})
end

local optOut = ' (or, for a server that truly hides INFO, start the node with --redis-identity=none,'
  .. ' which turns off the detection of Redis losing writes and this check)'

-- serverInfo reads INFO server replication memory and returns this
-- server's identity (run_id:master_replid: its process and replication
-- history) and the INFO text, or ends the script (see the top). identity
-- is the scripts' identity argument: "none" reads nothing and returns ''.
-- guardInfo is the INFO text serverInfo read ('' before it, or with
-- identity none), for what the scripts after the guard read from INFO
-- (infoField): one INFO call per script, and nothing a narrowed ACL
-- rule would refuse in a second call.
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

-- listedReplicas is how many replicas this server lists now (0 when INFO
-- cannot tell): where the fleet's replicas high-water mark starts when
-- {ns}:meta is made (replicas.lua).
local function listedReplicas()
  return tonumber(infoField('connected_slaves') or '0') or 0
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
  if prevRepl and infoField('master_replid2') == prevRepl then
    mark = mark - 1
  end
  return math.max(listedReplicas(), mark)
end

-- guard checks {ns}:meta against this server. meta, events: keys; gen:
-- the generation to create {ns}:meta with when it is missing; created: its
-- other fields then (a flat list); ev: the writer's event fields;
-- identity: the scripts' identity argument (serverInfo).
-- Returns generation, loss_ms (number), how ('' | 'created' | 'server'),
-- loss_id. loss_id names the last possible loss (this server's identity
-- and the time): an owner that saw another one at its last renewal knows
-- Redis may have lost writes since, whatever the clocks of the two
-- servers say (renew.lua).
--
-- A key the registry keeps without a TTL can still go while the identity
-- stays: evicted while the policy was allkeys-* (the scripts refuse to
-- write then, but Redis evicts regardless), or deleted by hand. {ns}:meta
-- gone reads as a total loss ('created'); the reservations, {ns}:reserved,
-- gone while {ns}:meta says a claim wrote them ('reserved', claim.lua)
-- reads as a loss at this moment, like an identity change: every tick
-- granted before is at most now + the horizon, so claims start above the
-- loss floor and no renewal extends across it. Other keys need no check:
-- the counter floors a missing key at TIME + lead, owners restore a
-- missing layout, leases are expected to expire.
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
