-- layout.lua: the window in which a layout stored by a claim or counter
-- call on an empty registry (a new fleet, or Redis lost everything) may
-- still be overridden by an owner from before a loss (renew.lua); the
-- newcomer issues nothing until it closes. {ns}:meta records it:
-- layout_settle_ms (until when), layout_loss_id (the loss ID it was stored
-- under), layout_settle_id (the loss ID it was last opened under). A loss
-- that interrupts the window opens it again, and owners that held their
-- leases through it restore their layout once more (found by the
-- simulator).

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
