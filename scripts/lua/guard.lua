-- guard.lua: the start of every script that writes the registry or the
-- counter; contract's lua.go puts it in front, after args.lua and
-- events.lua, so the check runs in the same atomic call as the write. It
-- notices that Redis may have lost acknowledged writes (a new run_id or
-- master_replid) and refuses to write when it cannot tell
-- (docs/design.md, Why the scripts are safe). Refusals are "UNSAFE
-- <check>: <code> <facts>" (contract.UnsafeCheck reads them,
-- contract.Explain writes them out).

-- redisSkewMs: how far apart the clocks of one deployment's Redis
-- servers may be; floors after a loss add it. Go: contract.RedisSkew.
local redisSkewMs = 1000

-- redisNow is Redis TIME in ms (text and number) and in us.
local function redisNow()
  local t = redis.call('TIME')
  local ms = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
  return tostring(ms), ms, tonumber(t[1]) * 1e6 + tonumber(t[2])
end

-- tickOf converts Redis microseconds (redisNow's third value; a time in
-- ms times 1000) to a tick of the layout whose epoch (us) and tick length
-- (us) the caller was given.
local function tickOf(us, epochUs, unitUs)
  return math.floor((us - epochUs) / unitUs)
end

-- fail ends the script with the error reply "<code> <text>", the one way
-- a script fails: code is UNSAFE, NOREGISTRY or INVALID (a stored or sent
-- value the script cannot use). A plain string raised at level 0 (no
-- position), which redis-server, miniredis and gopher-lua all pass on,
-- each in its own wrapping (contract's scriptError takes it off); an error
-- table is lost by miniredis, and redis.error_reply ends only the script's
-- top level.
local function fail(code, text)
  error(code .. ' ' .. text, 0)
end

-- unsafe ends the script with an error reply, before any write: a code
-- and its facts, which Go writes out with the fix (contract.Explain).
local function unsafe(check, code, facts)
  fail('UNSAFE', check .. ': ' .. code .. ' ' .. (facts or ''))
end

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
    unsafe('identity', string.find(string.lower(e), 'unknown', 1, true) and 'info-unknown' or 'info-denied', e)
  end
  local run, repl = string.match(info, 'run_id:(%w+)'), string.match(info, 'master_replid:(%w+)')
  if not run or not repl then
    unsafe('identity', 'no-field', run and 'master_replid' or 'run_id')
  end
  local policy = string.match(info, 'maxmemory_policy:(%w+)')
  if policy == 'allkeys' then
    unsafe('eviction', 'allkeys', string.match(info, 'maxmemory_policy:([%w-]+)'))
  elseif not policy then
    unsafe('eviction', 'no-policy')
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
-- place, with the replicas listed since counted anew (this server was one
-- of them), the same after a restart (replicas.lua).
local function replicasAfterChange(meta, previous)
  local mark = tonumber(redis.call('HGET', meta, 'replicas') or '0') or 0
  local prevRepl = previous and string.match(previous, ':(%w+)$')
  if prevRepl and infoField('master_replid2') == prevRepl then
    mark = mark - 1
    redis.call('HDEL', meta, 'replica_set')
  end
  return math.max(listedReplicas(), mark)
end

-- noRegistry ends the script before any write: the namespace has no
-- registry (key is missing) and the caller has never run under it.
local function noRegistry(key)
  fail('NOREGISTRY', key)
end

-- guard checks {ns}:meta against this server; events and who: {ns}:events
-- and the writer's event fields, which every event of the call carries
-- (emit), trimming the stream to about A.maxlen; tick: the tick now,
-- recorded when it makes {ns}:meta (nil: not recorded).
-- Only flaked init (init.lua) makes a registry: a missing {ns}:meta is
-- restored by a caller that has run under it (A.generation ~= ''), with a
-- loss recorded now and the replicas mark it last used (A.mark), and refused (NOREGISTRY) to anyone else, who cannot
-- tell a new fleet from a Redis that lost everything.
-- Returns generation, loss_ms, how ('' | 'created' | 'server'), loss_id
-- (this server and the time of the last possible loss). {ns}:reserved
-- gone while {ns}:meta says a claim wrote it counts as a loss.
local function guard(meta, events, who, tick)
  eventsKey, eventsMaxLen, eventsWho = events, A.maxlen, who
  local nowText, nowMs = redisNow()
  local id = serverInfo(A.identity)
  local lossID = id .. '@' .. nowText
  local m = redis.call('HMGET', meta, 'generation', 'server', 'loss_ms', 'loss_id', 'reserved')
  if not m[1] then
    if A.generation == '' then noRegistry(meta) end
    -- The mark as the caller last used it, or the replicas listed now if
    -- more: a server that lost everything lists only the replicas that
    -- came back to it, and a grant acknowledged by fewer than the fleet's
    -- mark may miss the one promoted meanwhile.
    redis.call('HSET', meta, 'generation', A.generation, 'created_ms', nowText, 'server', id,
      'loss_ms', nowText, 'loss_id', lossID, 'replicas', math.max(listedReplicas(), tonumber(A.mark or '0') or 0))
    if tick then redis.call('HSET', meta, 'created_tick', tick) end
    return A.generation, nowMs, 'created', lossID
  end
  local evicted = m[5] and redis.call('EXISTS', string.sub(meta, 1, -5) .. 'reserved') == 0
  if m[2] == id and not evicted then
    return m[1], tonumber(m[3] or 0), '', m[4] or ''
  end
  -- Never lower loss_ms: a new master's clock may be behind the old one's.
  local lossMs = math.max(tonumber(m[3] or 0), nowMs)
  redis.call('HSET', meta, 'server', id, 'loss_ms', tostring(lossMs), 'loss_id', lossID,
    'replicas', replicasAfterChange(meta, m[2]))
  local detail = 'server-changed' -- contract.DataLossText words the codes
  if m[2] == id then
    redis.call('HDEL', meta, 'reserved') -- the next claim writes both again
    detail = 'reservations-gone'
  end
  emit('dataloss', '', 'server', id, 'previous_server', m[2] or '', 'detail', detail)
  return m[1], lossMs, 'server', lossID
end

-- fleetValue is the fleet's value of a {ns}:meta field fixed once for the
-- fleet (horizon, counter_lead): the first caller that finds none, after
-- flaked init or a restore of {ns}:meta, fixes it to its own.
local function fleetValue(meta, field, own)
  local v = tonumber(redis.call('HGET', meta, field) or '')
  if v then return v end
  redis.call('HSET', meta, field, own)
  return tonumber(own)
end

-- fleetLayout is the fleet's layout ({ns}:layout at key), which flaked
-- init stores with {ns}:meta. When Redis lost it, a caller that has run
-- under its layout (A.generation ~= '') restores it, anyone else is
-- refused (NOREGISTRY): so no layout is ever stored but the one the fleet
-- was made with, and a misconfigured node is refused, never adopted.
local function fleetLayout(key, layout)
  local stored = redis.call('GET', key)
  if stored then return stored end
  if A.generation == '' then noRegistry(key) end
  redis.call('SET', key, layout)
  emit('layout_restored', '', 'layout', layout, 'detail', 'fleet layout missing: restored by a node of the fleet')
  return layout
end
