-- init.lua: make the registry of a fleet (flaked init): {ns}:meta and
-- {ns}:layout, which no node's call makes (guard.lua). contract's lua.go
-- puts guard.lua in front.
--
-- KEYS[1] {ns}:meta KEYS[2] {ns}:layout KEYS[3] {ns}:events
-- ARGV and reply: InitArgs (init.go).
--
-- The registry is made as a restored one is, with a possible loss now:
-- init cannot tell a new fleet from one whose Redis lost everything a
-- moment ago while its nodes still issue, so claims start above now +
-- skew + horizon and counter values above now + skew + lead (coord.Init
-- waits that out). Refused when {ns}:meta or {ns}:layout exists.
local meta = redis.call('HMGET', KEYS[1], 'generation', 'created_ms')
if meta[1] then
  return {'EXISTS', KEYS[1], 'generation ' .. meta[1] .. ' made at ' .. (meta[2] or '?') .. ' ms'}
end
local stored = redis.call('GET', KEYS[2])
if stored then
  return {'EXISTS', KEYS[2], 'layout ' .. stored}
end
local _, _, nowUs = redisNow()
local _, lossMs, _, lossID = guard(KEYS[1], KEYS[3], {'host', A.host, 'pid', A.pid},
  tickOf(nowUs, tonumber(A.epochUs), tonumber(A.tickUs)))
fleetValue(KEYS[1], 'horizon', A.horizon)
redis.call('SET', KEYS[2], A.layout)
emit('init', '', 'layout', A.layout, 'generation', A.generation, 'loss_id', lossID, 'detail', 'registry made by flaked init')
return {'OK', A.generation, lossID, lossMs}
