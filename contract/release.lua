-- release.lua: give back the leases of one owner on a clean shutdown.
-- guard.lua runs first.
--
-- KEYS[1] {ns}:reserved KEYS[2] {ns}:events KEYS[3] {ns}:meta
-- ARGV and reply: ReleaseArgs (release.go).
--
-- While we hold the lease, the reservation is set to the exact last tick
-- used, so a clean restart starts at once: the only place a reservation
-- goes down (only the holder could have used those ticks, and it has
-- stopped). An ID whose lease is no longer ours keeps the higher of the two.
local A = args()
local prefix, token, last, maxlen = A.prefix, A.token, tonumber(A.last), A.maxlen
local host, pid, addr = A.host, A.pid, A.addr
local nowText, _, nowUs = redisNow()
guard(KEYS[3], KEYS[2], maxlen, A.generation,
  {'created_tick', math.floor((nowUs - tonumber(A.epochUs)) / tonumber(A.tickUs))},
  {'token', token, 'host', host, 'pid', pid, 'addr', addr}, A.identity)
local released = 0
for _, id in ipairs(list(A.ids)) do
  local lease = prefix .. 'lease:' .. id
  local r = tonumber(redis.call('HGET', KEYS[1], id) or -1)
  if redis.call('GET', lease) == token then
    redis.call('DEL', lease)
    redis.call('HSET', KEYS[1], id, last)
    redis.call('HSET', prefix .. 'owner:' .. id, 'state', 'released', 'released', nowText, 'heartbeat', nowText)
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', 'type', 'release', 'mid', id,
      'token', token, 'host', host, 'pid', pid, 'addr', addr, 'last', last, 'reserved', r)
    released = released + 1
  elseif last > r then
    redis.call('HSET', KEYS[1], id, last)
  end
end
return released
