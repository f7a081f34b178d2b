-- replicas.lua: how many replicas must hold a grant before its node uses
-- it (the Go side sends WAIT <that many> on the same connection; a grant
-- WAIT does not confirm is not used). contract's lua.go puts it after guard.lua in
-- front of the granting scripts. The count is {ns}:meta's high-water mark
-- of replicas listed, which scripts only raise (docs/design.md, Why the
-- scripts are safe). Returns it and the replicas listed now ("ip:port
-- state", comma separated); with identity none, the mark as stored.
local function replicasNeeded(meta)
  local mark = tonumber(redis.call('HGET', meta, 'replicas') or '0') or 0
  local want = math.max(mark, listedReplicas())
  if want ~= mark then redis.call('HSET', meta, 'replicas', want) end
  local names = {}
  for ip, port, state in string.gmatch(guardInfo, 'slave%d+:ip=([^,]*),port=(%d+),state=(%w+)') do
    names[#names + 1] = ip .. ':' .. port .. ' ' .. state
  end
  return want, table.concat(names, ',')
end
