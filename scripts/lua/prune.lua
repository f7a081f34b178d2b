-- prune.lua: forget machine IDs nobody uses any more (flaked audit prune).
--
-- KEYS[1] {ns}:machines  KEYS[2] {ns}:reserved  KEYS[3] {ns}:events
-- ARGV and reply: PruneArgs (prune.go).
--
-- Each ID is checked again atomically (a node may have claimed it since
-- the audit read the registry): it is left alone when its lease exists,
-- its reservation is missing or not below the cutoff, or its owner token
-- changed. The reservation is never touched: the next owner starts above
-- it. The events are added untrimmed (the next node event trims).
local prefix, cutoff = A.prefix, tonumber(A.cutoff)
eventsKey, eventsWho = KEYS[3], {'host', A.host, 'pid', A.pid, 'addr', ''}
local out = {}
for _, item in ipairs(list(A.ids)) do
  local id, seen = string.match(item, '^(%d+):(.*)$')
  local ownerKey = prefix .. 'owner:' .. id
  local outcome = 'pruned'
  local r = redis.call('HGET', KEYS[2], id)
  if redis.call('EXISTS', prefix .. 'lease:' .. id) == 1 then
    outcome = 'live'
  elseif not r or tonumber(r) >= cutoff then
    outcome = 'recent'
  elseif (redis.call('HGET', ownerKey, 'token') or '') ~= seen then
    outcome = 'changed'
  end
  if outcome == 'pruned' then
    local prev = redis.call('HMGET', ownerKey, 'host', 'pid', 'addr', 'token', 'state')
    redis.call('SREM', KEYS[1], id)
    redis.call('DEL', ownerKey)
    emit('prune', id, 'reserved', r, 'prev_host', prev[1] or '', 'prev_pid', prev[2] or '',
      'prev_addr', prev[3] or '', 'prev_token', prev[4] or '', 'prev_state', prev[5] or 'orphan')
  end
  out[#out + 1] = id
  out[#out + 1] = outcome
end
return out
