package node

import (
	"context"
	"errors"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
)

// Issuing on under a lost lease.
//
// A lease is lost when a renewal finds its key gone (it expired: the node
// was paused or cut off past its TTL, or Redis evicted it under a
// volatile-* policy), held by another owner (taken over after it expired,
// or by a copy of this node's state file: fenced), or Redis may have lost
// writes since the last renewal (it restarted or failed over:
// coord.ErrPossibleLoss; renew.lua reads that first, so a Redis that came
// back empty, the lease key gone with everything else, counts too). What
// the lease had already granted stays this node's to issue, whichever it
// was: a grant is used only once renew.lua wrote it into the machine ID's
// reservation on the master and the replicas acknowledged it, and every
// claim of that machine ID, by anyone, starts above its reservation (a
// renewal the replicas did not acknowledge only raised it) or, after a
// possible loss, above the loss floor (loss_ms + the Redis clocks' skew +
// the horizon), past every grant made before the loss, on this machine ID
// too; a copy of this node that took the lease over (and may have been
// lost with the data) started above the reservation it took over, which is
// at least what was granted here, while this node's renewals since failed
// and granted nothing more. So the generator goes on under its grant while
// the node claims again (preferring the machine IDs it lost: its own
// reservation is their floor), and gives way to a generator under the new
// lease when the old grant is nearly spent and the new one issues without
// making callers wait (startsNowLocked: Redis grants the tick after the
// loss floor a skew after the loss, and a reservation of its own at once,
// and the new generator starts there), or once the old grant is spent.
// Everything the old generator may issue is below n.bound, where the new
// one starts. Only a lease lost to another fleet layout stops at once: the
// grant was made under a layout the fleet no longer uses.

// drainsLocked reports whether the running generator may go on under its
// lost lease: lost to anything but another fleet layout.
func (n *Node) drainsLocked() bool {
	if n.lease == nil {
		return false
	}
	err := n.lease.Err()
	return err != nil && !errors.Is(err, coord.ErrLayoutMismatch) && n.generatorLocked() != nil && n.genLease == n.lease
}

// drainingLocked reports whether the running generator issues under a lost
// lease, n.lease being its replacement or nil.
func (n *Node) drainingLocked() bool {
	return n.generatorLocked() != nil && n.genLease != n.lease
}

// drainLastsLocked reports whether the running generator's grant outlasts
// two more health checks: what swapDueLocked keeps for the swap.
func (n *Node) drainLastsLocked() bool {
	g := n.generatorLocked()
	if g == nil {
		return false
	}
	return grantLeft(g) > n.swapMarginLocked()
}

// grantLeft is how many ticks of its grant g has not issued yet.
func grantLeft(g *flake.Generator) int64 {
	st := g.Stats()
	return st.Granted - max(st.Now, st.Last)
}

// swapMarginLocked is two health checks' worth of ticks (at least one).
func (n *Node) swapMarginLocked() int64 {
	return max(1, int64(2*n.opts.CheckInterval/n.reg.Layout().TimeUnit))
}

// swapDueLocked reports whether g, draining a lost lease, should give way
// to a generator under n.lease: g's grant is spent, or nearly (two health
// checks' worth is left) and the new one issues at once. Not sooner: the
// new lease starts at the loss floor, ahead of the clock, and every tick
// drained first keeps the node's IDs nearer its clock.
func (n *Node) swapDueLocked(ctx context.Context, g *flake.Generator) bool {
	left := grantLeft(g)
	if left <= 0 {
		return true
	}
	return left <= n.swapMarginLocked() && n.startsNowLocked(ctx)
}
