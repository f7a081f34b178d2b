-- events.lua: the one writer of {ns}:events. contract's lua.go puts it
-- after args.lua in front of every script that adds events: the writing
-- ones (guard.lua sets what it writes with), prune.lua and mark.lua.

-- eventsKey is {ns}:events; eventsMaxLen trims it to about that many
-- entries (nil: not trimmed, the next event that is trims it); eventsWho
-- is the writer's fields, which every event of the call carries.
local eventsKey, eventsMaxLen, eventsWho = nil, nil, {}

-- emit adds an event: its type, machine ID ('' for none), the writer's
-- fields and the fields given.
local function emit(kind, mid, ...)
  local cmd = eventsMaxLen and {'XADD', eventsKey, 'MAXLEN', '~', eventsMaxLen} or {'XADD', eventsKey}
  for _, fields in ipairs({{'*', 'type', kind, 'mid', mid}, eventsWho, {...}}) do
    for _, v in ipairs(fields) do cmd[#cmd + 1] = v end
  end
  redis.call(unpack(cmd))
end
