-- layout.lua: the window in which a newly stored fleet layout may still be
-- overridden. lua.go puts it after guard.lua in front of claim, renew and
-- counter.
--
-- A claim or a counter call that finds no layout (the fleet's first start,
-- or Redis lost everything) stores its own, and the layout is unsettled for
-- a while: an owner from before a loss, with leases in the old layout,
-- restores that one at its next renewal (renew.lua), and the newcomer
-- issues nothing until the window closes. {ns}:meta records the window:
--   layout_settle_ms  until when (Redis ms) it is open;
--   layout_loss_id    the loss ID (guard.lua) the layout was stored under;
--   layout_settle_id  the loss ID the window was last opened under.
-- The fields go when the window closes in the server life it was opened
-- in (the first script after it), or when an owner overrides the layout.
--
-- Redis may then lose writes again, back to a copy made while the window
-- was open (a failover, a restart from a snapshot, an old backup): the
-- restored layout may be one an owner already overrode, and the node
-- that stored it was refused. So a window that a loss interrupted opens
-- again, from the first claim or counter call that sees it: owners that
-- held their leases through the first window (their last renewal was
-- under layout_loss_id: they overrode it) restore their layout once more,
-- and a claim meanwhile waits (found by the simulator).

-- storeLayout stores layout as the fleet's in an empty registry and opens
-- its window for settleMs.
local function storeLayout(layoutKey, meta, layout, lossID, nowMs, settleMs)
  redis.call('SET', layoutKey, layout)
  if settleMs > 0 then
    redis.call('HSET', meta, 'layout_settle_ms', tostring(nowMs + settleMs),
      'layout_loss_id', lossID, 'layout_settle_id', lossID)
  end
end

-- layoutWindow reads the window, closes it when it ran out in the server
-- life it was opened in, and opens it again for reopenMs (0: do not) when a
-- loss interrupted it. Returns until (ms; open while until > nowMs), the
-- loss ID the layout was stored under (nil: none recorded, or settled), and
-- whether the window was last opened under lossID.
local function layoutWindow(meta, lossID, nowMs, reopenMs)
  local w = redis.call('HMGET', meta, 'layout_settle_ms', 'layout_loss_id', 'layout_settle_id')
  local untilMs, storedUnder = tonumber(w[1] or 0), w[2]
  if not storedUnder then
    return untilMs, nil, false
  end
  if w[3] ~= lossID then
    if reopenMs <= 0 then
      return untilMs, storedUnder, false
    end
    untilMs = nowMs + reopenMs
    redis.call('HSET', meta, 'layout_settle_ms', tostring(untilMs), 'layout_settle_id', lossID)
    return untilMs, storedUnder, true
  end
  if untilMs <= nowMs then
    redis.call('HDEL', meta, 'layout_settle_ms', 'layout_loss_id', 'layout_settle_id')
    return 0, nil, true
  end
  return untilMs, storedUnder, true
end

-- overrideLayout restores an owner's layout over a newcomer's and closes
-- the window.
local function overrideLayout(layoutKey, meta, layout)
  redis.call('SET', layoutKey, layout)
  redis.call('HDEL', meta, 'layout_settle_ms', 'layout_loss_id', 'layout_settle_id')
end
