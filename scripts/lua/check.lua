-- check.lua: sonyflake's CheckMachineID. 1 only when every given lease is
-- held by this token.
--
-- ARGV: 1 key prefix, 2 token, 3.. machine IDs.
-- KEYS[1] {ns}:machines routes the call to the namespace's slot.
for i = 3, #ARGV do
  if redis.call('GET', ARGV[1] .. 'lease:' .. ARGV[i]) ~= ARGV[2] then
    return 0
  end
end
return 1
