-- init.lua: make the registry of a new fleet (flaked init). lua.go puts
-- guard.lua in front for its helpers (redisNow, serverInfo); its
-- guard does not run: there is nothing to guard yet.
--
-- KEYS[1] {ns}:meta KEYS[2] {ns}:layout KEYS[3] {ns}:events
-- ARGV (name = value; args.lua): generation; layout = canonical layout;
--   epochUs, tickUs = epoch and tick length (us); maxlen = events maxlen;
--   host, pid = the caller's; identity = as for every writing script.
--
-- An operator who knows the fleet is new says so (as etcd's
-- --initial-cluster-state new): {ns}:meta is written with this server's
-- identity and no possible loss (loss_ms 0), the layout without a settle
-- window, so the first claim starts at once. Refused when {ns}:meta or
-- {ns}:layout exists. Returns {"OK", generation, identity} or {"EXISTS",
-- key, detail}.
local A = args()
local nowText, _, nowUs = redisNow()
local meta = redis.call('HMGET', KEYS[1], 'generation', 'created_ms')
if meta[1] then
  return {'EXISTS', KEYS[1], 'generation ' .. meta[1] .. ' made at ' .. (meta[2] or '?') .. ' ms'}
end
local stored = redis.call('GET', KEYS[2])
if stored then
  return {'EXISTS', KEYS[2], 'layout ' .. stored}
end
local id = serverInfo(A.identity)
redis.call('HSET', KEYS[1], 'generation', A.generation, 'created_ms', nowText,
  'created_tick', math.floor((nowUs - tonumber(A.epochUs)) / tonumber(A.tickUs)),
  'server', id, 'loss_ms', '0', 'loss_id', id .. '@init', 'replicas', listedReplicas())
redis.call('SET', KEYS[2], A.layout)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', A.maxlen, '*', 'type', 'init', 'mid', '',
  'host', A.host, 'pid', A.pid, 'layout', A.layout, 'generation', A.generation, 'server', id,
  'detail', 'registry made for a new fleet by flaked init: no loss floor, no layout settle window')
return {'OK', A.generation, id}
