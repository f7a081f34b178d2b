-- check.lua: sonyflake's CheckMachineID. 1 only when every given lease is
-- held by this token.
--
-- KEYS[1] {ns}:machines routes the call to the namespace's slot.
-- ARGV (name = value; args.lua): prefix = key prefix; token; ids.
local A = args()
for _, id in ipairs(list(A.ids)) do
  if redis.call('GET', A.prefix .. 'lease:' .. id) ~= A.token then
    return 0
  end
end
return 1
