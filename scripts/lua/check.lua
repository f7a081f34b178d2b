-- check.lua: sonyflake's CheckMachineID (CheckArgs, check.go).
-- KEYS[1] {ns}:machines routes the call to the namespace's slot.
for _, id in ipairs(list(A.ids)) do
  if redis.call('GET', A.prefix .. 'lease:' .. id) ~= A.token then
    return 0
  end
end
return 1
