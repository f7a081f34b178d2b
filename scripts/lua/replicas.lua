-- replicas.lua: how many replicas must hold a grant before its node uses
-- it (the Go side sends WAIT <that many> on the same connection; a grant
-- WAIT does not confirm is not used). contract's lua.go puts it after guard.lua in
-- front of the granting scripts. The count is {ns}:meta's high-water mark
-- of replicas, which scripts only raise (docs/design.md, Why the scripts
-- are safe): at least the replicas listed now, and at least the replicas
-- listed since this server took the registry over, counted by address
-- ({ns}:meta's replica_set): two replicas listed in turns, never
-- together, are two, and a grant only one of them acknowledged would be
-- missing from the other once promoted. Returns it and the replicas
-- listed now ("ip:port state", comma separated); with identity none, the
-- mark as stored.
local function replicasNeeded(meta)
  local mark = tonumber(redis.call('HGET', meta, 'replicas') or '0') or 0
  local seen, count, added = {}, 0, false
  for a in string.gmatch(redis.call('HGET', meta, 'replica_set') or '', '[^,]+') do
    if not seen[a] then seen[a], count = true, count + 1 end
  end
  local names = {}
  for ip, port, state in string.gmatch(guardInfo, 'slave%d+:ip=([^,]*),port=(%d+),state=(%w+)') do
    local a = ip .. ':' .. port
    names[#names + 1] = a .. ' ' .. state
    if not seen[a] then seen[a], count, added = true, count + 1, true end
  end
  if added then
    local set = {}
    for a in pairs(seen) do set[#set + 1] = a end
    table.sort(set)
    redis.call('HSET', meta, 'replica_set', table.concat(set, ','))
  end
  local want = math.max(mark, listedReplicas(), count)
  if want ~= mark then redis.call('HSET', meta, 'replicas', want) end
  return want, table.concat(names, ',')
end
