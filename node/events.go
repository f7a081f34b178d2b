package node

import (
	"context"
	"time"

	"github.com/flaked/flaked/contract"
)

// setModeLocked logs a mode change and writes it to the audit stream;
// n.mu is held.
func (n *Node) setModeLocked(mode Mode, reason string) {
	from := n.entered
	n.entered = mode
	if from == mode {
		return
	}
	mid := n.reg.Layout().CounterMachineID()
	if n.lease != nil {
		mid = n.lease.MachineIDs()[0]
	}
	ev := n.log.Info()
	if from != ModeNone && mode != ModeStopped {
		n.switches.Add(1)
		ev = n.log.Warn()
	}
	ev.Str("from", from.String()).Str("to", mode.String()).Str("reason", reason).Int("machine_id", mid).Msg("mode")
	n.pending = append(n.pending, []any{mid, contract.FieldFrom, from.String(), contract.FieldTo, mode.String(), contract.FieldReason, reason,
		contract.FieldAtMs, n.opts.Clock.Now().UnixMilli()})
	if len(n.pending) > maxPendingEvents {
		n.pending = n.pending[1:]
	}
	n.flushEventsLocked()
}

// maxPendingEvents bounds the mode events kept while Redis is away.
const maxPendingEvents = 100

// flushEventsLocked writes the mode events not written yet: a switch
// caused by Redis being away is written once it is back (at_ms is when it
// happened).
func (n *Node) flushEventsLocked() {
	if len(n.pending) == 0 || n.opts.Clock.Monotonic() < n.flushAt {
		return
	}
	for len(n.pending) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		ev := n.pending[0]
		err := n.reg.Event(ctx, contract.EventMode, ev[0].(int), ev[1:]...)
		cancel()
		if err != nil {
			// Redis is away: try again in a second, not at every check.
			n.flushAt = n.opts.Clock.Monotonic() + time.Second
			n.log.Debug().Err(err).Int("pending", len(n.pending)).Msg("mode event not written yet")
			return
		}
		n.pending = n.pending[1:]
	}
}

// modeLocked is the mode last entered, or before the first the configured
// one: what the owner data and a closed node's source say.
func (n *Node) modeLocked() Mode {
	if n.entered != ModeNone {
		return n.entered
	}
	return n.opts.Mode
}
