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
local prefix, token, last = A.prefix, A.token, tonumber(A.last)
local nowText, _, nowUs = redisNow()
guard(KEYS[3], KEYS[2], {'token', token, 'host', A.host, 'pid', A.pid, 'addr', A.addr},
  tickOf(nowUs, tonumber(A.epochUs), tonumber(A.tickUs)))
local released = 0
for _, id in ipairs(list(A.ids)) do
  local lease = prefix .. 'lease:' .. id
  local r = tonumber(redis.call('HGET', KEYS[1], id) or -1)
  if redis.call('GET', lease) == token then
    redis.call('DEL', lease)
    redis.call('HSET', KEYS[1], id, last)
    redis.call('HSET', prefix .. 'owner:' .. id, 'state', 'released', 'released', nowText, 'heartbeat', nowText)
    emit('release', id, 'last', last, 'reserved', r)
    released = released + 1
  elseif last > r then
    redis.call('HSET', KEYS[1], id, last)
  end
end
return released
