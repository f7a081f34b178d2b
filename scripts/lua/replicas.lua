-- replicas.lua: how many replicas must hold a grant before its node uses
-- it. lua.go puts it after guard.lua in front of the scripts that grant
-- (claim, renew, counter); the Go side sends WAIT <that many> on the same
-- connection right after the script, and a grant WAIT does not confirm is
-- not used (coord/doc.go, Split brain).
--
-- The count is the fleet's high-water mark, the field "replicas" of
-- {ns}:meta: the most replicas this master has listed (connected_slaves,
-- read here in the same atomic call as the grant) since it took over the
-- registry. It is not "connected now": a master cut off from its replicas
-- lists them until repl-timeout (60 s) and then lists none, and WAIT 0
-- would pass. Scripts only raise it; an operator lowers it (flaked audit
-- replicas --set N) when a replica is gone for good. When guard.lua sees a
-- new identity it keeps the mark (a restart: the same replicas come back),
-- less one when this server is a replica promoted in place of the one
-- that wrote last (it no longer counts itself; with one replica the mark
-- drops to what it lists, so a failover whose old master never returns
-- does not stop the fleet); {ns}:meta made anew starts from the replicas
-- listed.
--
-- The replicas listed come from the INFO text guard.lua read (guardInfo):
-- one INFO call per script. With --redis-identity=none there is none: the
-- mark is used as stored.
--
-- Returns the count and the replicas listed now ("ip:port state" each,
-- comma separated) for the error that names them.
local function replicasNeeded(meta)
  local info = guardInfo
  local mark = tonumber(redis.call('HGET', meta, 'replicas') or '0') or 0
  local listed = tonumber(string.match(info, 'connected_slaves:(%d+)') or '')
  if not listed then return mark, '' end
  local names = {}
  for ip, port, state in string.gmatch(info, 'slave%d+:ip=([^,]*),port=(%d+),state=(%w+)') do
    names[#names + 1] = ip .. ':' .. port .. ' ' .. state
  end
  local want = math.max(mark, listed)
  if want ~= mark then redis.call('HSET', meta, 'replicas', want) end
  return want, table.concat(names, ',')
end
