-- mark.lua: set the fleet's replicas high-water mark ({ns}:meta's
-- replicas) to an operator's count, with a replicas event.
--
-- KEYS[1] {ns}:meta KEYS[2] {ns}:events
-- ARGV and reply: MarkArgs (mark.go).
--
-- Only where {ns}:meta exists: a partial {ns}:meta would read as a
-- registry made anew.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local prev = tonumber(redis.call('HGET', KEYS[1], 'replicas') or '0') or 0
redis.call('HSET', KEYS[1], 'replicas', A.replicas)
-- The replicas listed since are counted anew: a server gone for good
-- (the reason to lower the mark) is never listed again.
redis.call('HDEL', KEYS[1], 'replica_set')
eventsKey, eventsMaxLen, eventsWho = KEYS[2], A.maxlen, {'host', A.host}
emit('replicas', '', 'replicas', A.replicas, 'previous', prev, 'detail', 'replicas high-water mark set by an operator')
return prev
