-- args.lua: the start of every script (contract's lua.go puts it in
-- front). ARGV is name/value pairs, which the Go Args types send
-- (argv.go): A is them as a table; list() splits a comma-joined value
-- (empty items kept).
local A = {}
for i = 1, #ARGV - 1, 2 do A[ARGV[i]] = ARGV[i + 1] end

local function list(s)
  local out = {}
  for x in string.gmatch(s ~= '' and s and s .. ',' or '', '([^,]*),') do out[#out + 1] = x end
  return out
end
