-- release.lua: give back the leases of one owner on a clean shutdown.
-- guard.lua runs first.
--
-- KEYS[1] {ns}:reserved KEYS[2] {ns}:events KEYS[3] {ns}:meta
-- ARGV: 1 key prefix, 2 token, 3 last tick used, 4 events maxlen,
--   5 host, 6 pid, 7 addr, 8 generation, 9 epoch (us), 10 tick length (us),
--   11 identity ("info", or the operator's opt-in "none": guard.lua),
--   12.. machine IDs.
--
-- While we hold the lease, the reservation is set to the exact last tick
-- used, so a clean restart starts at once: the only place a reservation
-- goes down (only the holder could have used those ticks, and it has
-- stopped). An ID whose lease is no longer ours keeps the higher of the two.
-- Returns the number of leases released.
local prefix, token, last, maxlen = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local host, pid, addr = ARGV[5], ARGV[6], ARGV[7]
local nowText, _, nowUs = redisNow()
guard(KEYS[3], KEYS[2], maxlen, ARGV[8],
  {'created_tick', math.floor((nowUs - tonumber(ARGV[9])) / tonumber(ARGV[10]))},
  {'token', token, 'host', host, 'pid', pid, 'addr', addr}, ARGV[11])
local released = 0
for i = 12, #ARGV do
  local id = ARGV[i]
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
