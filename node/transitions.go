package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/statefile"
)

func (n *Node) clockTick() int64 { return n.reg.Layout().Tick(n.opts.Clock.Now()) }

// floorLocked is the tick a new generator must start after.
func (n *Node) floorLocked() int64 { return max(n.lease.Floor(), n.bound) }

// startsNowLocked reports whether a generator under n.lease would issue at
// once: its floor is within MaxLead of the clock, or the tick after it is
// granted already (asked for here when it is not), so the generator starts
// ahead of its clock (flake.Settings.MaxLead). Redis grants no further
// than its TIME + the fleet's horizon, so the loss floor after a restart
// or failover (loss + skew + horizon) is granted a skew after the loss,
// and a takeover's floor (a reservation made before) at once.
func (n *Node) startsNowLocked(ctx context.Context) bool {
	floor := n.floorLocked()
	unit := n.reg.Layout().TimeUnit
	if floor-n.clockTick() <= int64(n.opts.MaxLead/unit) {
		return true
	}
	if n.lease.Granted() <= floor {
		// A refusal grants nothing and is seen again on the next check.
		_, _ = n.lease.Reserve(ctx, floor+int64(n.opts.ReserveAhead/unit))
	}
	return n.lease.Granted() > floor
}

// startLocked enters the configured mode at New: in auto mode, counter
// mode when flake mode is not safe (but not when it is misconfigured).
func (n *Node) startLocked(ctx context.Context) error {
	var err error
	switch n.opts.Mode {
	case ModeCounter:
		if err = n.toCounterLocked(ctx, "mode counter"); err == nil {
			err = n.checkCounterLayout(ctx)
		}
	case ModeFlake:
		err = n.startFlakeLocked(ctx)
	case ModeAuto:
		if err = n.startAutoFlakeLocked(ctx); err != nil && fallsBack(err) {
			n.log.Warn().Err(err).Msg("flake mode is not safe at start; issuing in counter mode")
			if err = n.toCounterLocked(ctx, err.Error()); err == nil {
				// As a node started in counter mode: another layout, or no
				// registry, fails the start rather than the first ID.
				err = n.checkCounterLayout(ctx)
			}
		}
	}
	if err == nil && n.entered == ModeNone {
		n.setModeLocked(n.src.Load().mode, "start")
	}
	return err
}

// counterStartWait bounds the start's read of the fleet layout in counter
// mode: a Redis that is slow or away is not waited out at start.
const counterStartWait = 2 * time.Second

// checkCounterLayout fails the start of a node in counter mode whose
// layout (width, region) the fleet refuses, as flake mode's claim does,
// rather than at its first ID. Redis being away is not an error here: the
// counter keeps trying, and /readyz says so.
func (n *Node) checkCounterLayout(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, counterStartWait)
	defer cancel()
	if err := n.src.Load().ctr.CheckLayout(ctx); errors.Is(err, fallback.ErrLayoutMismatch) || errors.Is(err, fallback.ErrNoRegistry) {
		return fmt.Errorf("counter mode: %w", err)
	}
	return nil
}

// fallsBack reports whether err is a reason for auto mode to issue in
// counter mode rather than fail: flake mode is unsafe for now. A wrong
// configuration (layout, options, state file) is not.
func fallsBack(err error) bool {
	switch {
	case errors.Is(err, coord.ErrLayoutMismatch), errors.Is(err, fallback.ErrLayoutMismatch), errors.Is(err, coord.ErrInvalidOptions),
		errors.Is(err, coord.ErrNoRegistry),
		errors.Is(err, statefile.ErrCorrupt), errors.Is(err, statefile.ErrMismatch),
		errors.Is(err, statefile.ErrLocked), errors.Is(err, ErrClosed):
		return false
	}
	return true
}

// notStartedLocked is the error of a lease whose generator would make
// callers wait: its floor is ahead of the clock and not granted yet.
func (n *Node) notStartedLocked() error {
	ahead := time.Duration(n.floorLocked()-n.clockTick()) * n.reg.Layout().TimeUnit
	return fmt.Errorf("%w: the new lease starts %v ahead of the clock (max lead %v), past what Redis grants yet",
		ErrClockBehind, ahead, n.opts.MaxLead)
}

// startFlakeLocked claims machine IDs when none are held and starts a
// generator after everything issued so far.
func (n *Node) startFlakeLocked(ctx context.Context) error {
	if n.lease == nil {
		if err := n.claimLocked(ctx); err != nil {
			return err
		}
	}
	// The floor's next tick granted when Redis can, so nobody waits for
	// the clock. A floor further ahead than max wait is refused only when
	// callers would wait for it: one Redis grants past already (the last
	// counter value a node in auto mode issued, its counter running up to
	// its lead ahead of Redis TIME) starts at once.
	floor := n.floorLocked()
	if gap := floor - n.clockTick(); !n.startsNowLocked(ctx) && gap > n.maxW {
		return fmt.Errorf("%w: machine IDs %v start at tick %d (%s), %v ahead of this clock, max wait %v; fix the clock or run in auto mode",
			ErrClockBehind, n.lease.MachineIDs(), floor+1, n.reg.Layout().TickTime(floor+1).Format(time.RFC3339Nano),
			time.Duration(gap)*n.reg.Layout().TimeUnit, n.reg.Options().MaxWait)
	}
	s := n.reg.Layout().Settings() // the whole layout: width and region too
	s.MachineIDs, s.MaxLead = n.lease.MachineIDs(), n.opts.MaxLead
	s.Floor, s.Reserved, s.Reserve, s.ReserveAhead = floor, n.lease.Granted(), n.lease.Reserve, n.opts.ReserveAhead
	s.Clock = n.opts.Clock
	gen, err := flake.New(s)
	if err != nil {
		return err
	}
	n.src.Store(&source{mode: ModeFlake, gen: gen})
	n.genLease = n.lease
	return nil
}

// startAutoFlakeLocked is startFlakeLocked for auto mode, whose callers
// must not wait for the clock: a lease whose generator would not issue at
// once (startsNowLocked) is kept, and counter mode serves until Redis
// grants past its floor (checkAutoCounterLocked). A restart after kill -9
// takes its lease over above the reservation the crashed process made
// ahead, which Redis grants past at once; a claim right after a Redis
// restart or failover starts at the loss floor, which Redis grants past a
// skew after the loss.
func (n *Node) startAutoFlakeLocked(ctx context.Context) error {
	if err := n.claimLocked(ctx); err != nil {
		return err
	}
	if !n.startsNowLocked(ctx) {
		return n.notStartedLocked()
	}
	return n.startFlakeLocked(ctx)
}

// generatorLocked is the running generator, or nil: in counter mode, once
// stopped for a switch or a lost lease, or when none could be started.
func (n *Node) generatorLocked() *flake.Generator {
	if g := n.src.Load().gen; g != nil && !g.Closed() {
		return g
	}
	return nil
}

// stopFlakeLocked closes the running generator; everything it issued is
// then below n.bound.
func (n *Node) stopFlakeLocked() {
	if g := n.generatorLocked(); g != nil {
		n.bound = max(n.bound, g.Close())
	}
}

// restartFlakeLocked replaces a lost (or missing) lease and its generator,
// staying in flake mode. A lost lease keeps its generator issuing under
// what it had granted while a new lease is claimed, until the new one's
// generator can take over (drain.go). With
// noWait a new lease whose generator would not issue at once (claimed
// again within a second of a Redis restart or failover: at the loss floor,
// which Redis does not grant past yet) gets no generator, so no caller
// waits on one: it returns ErrClockBehind and keeps the lease. Without,
// callers wait (up to MaxWait, which startFlakeLocked checks).
func (n *Node) restartFlakeLocked(ctx context.Context, noWait bool) error {
	if n.lease != nil && n.lease.Err() != nil {
		switch {
		case n.drainsLocked():
			// Everything the generator may still issue is at most this.
			n.bound = max(n.bound, n.lease.Granted())
			n.log.Warn().Err(n.lease.Err()).Ints("machine_ids", n.lease.MachineIDs()).Int64("granted", n.lease.Granted()).
				Msg("issuing on under the ticks already granted while claiming again")
		case n.genLease == n.lease || errors.Is(n.lease.Err(), coord.ErrLayoutMismatch):
			n.stopFlakeLocked()
		default:
			// A replacement lost while the generator drains an older
			// lease: that grant is as safe to issue from as before.
		}
		n.dropLeaseLocked(ctx)
	}
	if g := n.generatorLocked(); g != nil {
		if n.genLease == n.lease {
			return nil
		}
		if n.lease == nil {
			if err := n.claimLocked(ctx); err != nil {
				n.claimErr = err
				return err
			}
		}
		if !n.swapDueLocked(ctx, g) {
			return nil
		}
		n.stopFlakeLocked()
	}
	if noWait {
		if n.lease == nil {
			if err := n.claimLocked(ctx); err != nil {
				n.claimErr = err
				return err
			}
		}
		if !n.startsNowLocked(ctx) {
			// Callers would wait for the clock: the lease is kept, and
			// the caller decides (auto mode serves counter IDs meanwhile).
			return n.notStartedLocked()
		}
	}
	if err := n.startFlakeLocked(ctx); err != nil {
		n.claimErr = err
		return err
	}
	n.log.Info().Ints("machine_ids", n.lease.MachineIDs()).Msg("flake mode resumed")
	return nil
}

// toCounterLocked switches to counter mode: the generator stops, and the
// counter starts above everything it issued.
func (n *Node) toCounterLocked(ctx context.Context, reason string) error {
	n.stopFlakeLocked()
	co := n.opts.Counter
	if n.bound >= 0 || n.lease != nil || n.reg.Known() {
		// This node issued, or holds a lease, under the fleet's registry:
		// like a lease owner it restores the registry if Redis lost it.
		co.Known = true
	}
	ctr, err := fallback.New(n.rdb, co)
	if err != nil {
		return err
	}
	if n.bound >= 0 {
		l := n.reg.Layout()
		ceiling, _ := l.Compose(n.bound, l.MaxSequence(), l.CounterMachineID())
		ctr.SetFloor(ceiling)
	}
	n.reason = reason
	n.healthy = 0
	ctr.Warm()
	n.src.Store(&source{mode: ModeCounter, ctr: ctr})
	if n.lease != nil {
		n.lease.SetMode(ModeCounter.String())
	}
	n.setModeLocked(ModeCounter, reason)
	return nil
}

// toFlakeLocked returns from counter mode: the counter stops, and the
// generator starts above everything it issued.
func (n *Node) toFlakeLocked(ctx context.Context) error {
	if ctr := n.src.Load().ctr; ctr != nil {
		// Close first, so LastTick is final; on failure below the node
		// goes on with a new counter.
		ctr.Close()
		n.bound = max(n.bound, ctr.LastTick())
	}
	if err := n.startFlakeLocked(ctx); err != nil {
		_ = n.toCounterLocked(ctx, n.reason)
		return err
	}
	n.lease.SetMode(ModeFlake.String())
	n.reason = "healthy for " + n.opts.RecoverAfter.String()
	n.setModeLocked(ModeFlake, n.reason)
	return nil
}
