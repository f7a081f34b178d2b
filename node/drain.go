package node

import (
	"context"
	"errors"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
)

// Issuing through a possible data loss.
//
// A renewal that finds Redis may have lost writes since the last one (it
// restarted or failed over: coord.ErrPossibleLoss) loses the lease, since
// nothing is extended across such a change; renew.lua reads that first, so
// a Redis that came back empty, the lease key gone with everything else,
// counts too. What the lease had already
// granted stays this node's to issue: the grant was made before the loss,
// so it is below the loss floor (loss_ms + the Redis clocks' skew + the
// horizon) where every claim after the loss starts, on this machine ID
// too; and a copy of this node that took the lease over before the loss
// (and was lost with the data) started above the reservation it took
// over, which is at least what was granted here, while this node's
// renewals since failed (fenced) and granted nothing more. So the
// generator goes on under its grant while the node claims again, and
// gives way to a generator under the new lease when the old grant is
// nearly spent and the new one issues without making callers wait
// (startsNowLocked: Redis grants the tick after the loss floor a skew
// after the loss, and the new generator starts there, ahead of its
// clock), or once the old grant is spent. Everything the old
// generator may issue is below n.bound, where the new one starts.

// drainsLocked reports whether the running generator may go on under its
// lost lease: lost to a possible data loss, and nothing else.
func (n *Node) drainsLocked() bool {
	return n.lease != nil && errors.Is(n.lease.Err(), coord.ErrPossibleLoss) &&
		n.generatorLocked() != nil && n.genLease == n.lease
}

// drainingLocked reports whether the running generator issues under a lost
// lease, n.lease being its replacement or nil.
func (n *Node) drainingLocked() bool {
	return n.generatorLocked() != nil && n.genLease != n.lease
}

// swapDueLocked reports whether g, draining a lost lease, should give way
// to a generator under n.lease: g's grant is spent, or nearly (two health
// checks' worth is left) and the new one issues at once. Not sooner: the
// new lease starts at the loss floor, ahead of the clock, and every tick
// drained first keeps the node's IDs nearer its clock.
func (n *Node) swapDueLocked(ctx context.Context, g *flake.Generator) bool {
	st := g.Stats()
	left := st.Granted - max(st.Now, st.Last)
	if left <= 0 {
		return true
	}
	checks := max(1, int64(2*n.opts.CheckInterval/n.reg.Layout().TimeUnit))
	return left <= checks && n.startsNowLocked(ctx)
}
