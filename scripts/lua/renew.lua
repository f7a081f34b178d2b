-- renew.lua: extend the leases of one owner and raise its reservation.
--
-- KEYS[1] {ns}:reserved KEYS[2] {ns}:events KEYS[3] {ns}:machines
-- KEYS[4] {ns}:meta
-- ARGV: 1 key prefix, 2 token, 3 reservation wanted (tick), 4 reservation
--   the owner holds now (tick), 5 lease ttl (ms), 6 events maxlen,
--   7 mode, 8 host, 9 pid, 10 addr, 11 version, 12.. machine IDs.
--
-- For each ID: when the lease holds our token it is extended; when the
-- lease is gone (expired while we were paused, or Redis lost its data) it
-- is re-asserted, but only if nobody raised the reservation past ours in
-- the meantime (which would mean someone else used the ID). The
-- reservation is raised, never lowered, and only while holding the lease.
-- Returns {"OK", reservation, reasserted count, 1 if {ns}:meta is gone
-- (Redis lost its data) else 0} or
--         {"LOST", id, reason, holder}.
local prefix, token = ARGV[1], ARGV[2]
local want, held, ttl, maxlen = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6]
local mode, host, pid, addr, version = ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local t = redis.call('TIME')
local nowMs = tostring(math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000))

local function event(kind, id, ...)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', 'type', kind, 'mid', id,
    'token', token, 'host', host, 'pid', pid, 'addr', addr, ...)
end

-- Check every ID first, so a lost one changes nothing.
local missing = {}
for i = 12, #ARGV do
  local id = ARGV[i]
  local holder = redis.call('GET', prefix .. 'lease:' .. id)
  if not holder then
    local r = tonumber(redis.call('HGET', KEYS[1], id) or -1)
    if r > held then
      event('renew_fail', id, 'reason', 'reservation moved', 'reserved', r, 'held', held)
      return {'LOST', id, 'lease expired and reservation ' .. r .. ' moved past ours ' .. held, ''}
    end
    missing[id] = true
  elseif holder ~= token then
    event('renew_fail', id, 'reason', 'lease held by another owner', 'holder', holder)
    return {'LOST', id, 'lease held by another owner', holder}
  end
end

local reasserted = 0
local granted = nil
for i = 12, #ARGV do
  local id = ARGV[i]
  local lease = prefix .. 'lease:' .. id
  local owner = prefix .. 'owner:' .. id
  if missing[id] then
    redis.call('SET', lease, token, 'PX', ttl)
    redis.call('SADD', KEYS[3], id)
    redis.call('HSET', owner, 'host', host, 'pid', pid, 'addr', addr, 'version', version,
      'token', token, 'state', 'live', 'claimed', nowMs)
    if not redis.call('HGET', owner, 'first_claim') then
      redis.call('HSET', owner, 'first_claim', nowMs, 'started', nowMs)
    end
    event('reassert', id, 'reserved', math.max(held, want))
    reasserted = reasserted + 1
  else
    redis.call('PEXPIRE', lease, ttl)
    if redis.call('EXISTS', owner) == 0 then
      -- The owner data went away under a live lease (deleted by hand, or
      -- lost with a Redis failover): write it whole, not a partial hash.
      redis.call('HSET', owner, 'host', host, 'pid', pid, 'addr', addr, 'version', version,
        'token', token, 'state', 'live', 'claimed', nowMs, 'first_claim', nowMs, 'started', nowMs)
    end
  end
  local r = tonumber(redis.call('HGET', KEYS[1], id) or -1)
  local nr = math.max(r, want, held)
  if nr > r then redis.call('HSET', KEYS[1], id, nr) end
  redis.call('HSET', owner, 'heartbeat', nowMs, 'mode', mode)
  if granted == nil or nr < granted then granted = nr end
end
return {'OK', granted, reasserted, redis.call('EXISTS', KEYS[4]) == 0 and 1 or 0}
