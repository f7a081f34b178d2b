-- probe.lua: guard.lua's reading of INFO, from a script as the writing
-- scripts do it (ACL rules and rename-command apply), writing nothing:
-- flaked doctor and flaked serve's checks. No KEYS (on Redis Cluster it
-- is sent to each master), no ARGV. Returns {"OK", identity, INFO text}
-- or {"UNSAFE", the refusal a writing script would return}, which pcall
-- gets as fail() raised it.
local ok, id, info = pcall(serverInfo, 'info')
if ok then return {'OK', id, info} end
return {'UNSAFE', tostring(id)}
