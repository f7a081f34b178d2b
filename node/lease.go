package node

import (
	"context"
	"errors"
	"time"

	"github.com/flaked/flaked/coord"
)

// claimLocked claims machine IDs; in auto mode it does not wait for IDs
// further ahead than MaxWait, and drops a preferred one that is.
func (n *Node) claimLocked(ctx context.Context) error {
	prev, lost := n.prev, n.lost
	n.prev = nil // the state file's IDs are preferred once
	lease, err := n.reg.Claim(ctx, coord.ClaimOptions{Count: n.opts.MachineIDs, State: n.state, Previous: prev, Prefer: lost})
	if err != nil {
		return err
	}
	gap := max(lease.Floor(), n.bound) - n.clockTick()
	if lost != nil && prev == nil {
		gap = lease.Floor() - n.clockTick() // n.bound is what any ID starts after
	}
	if gap > n.maxW && (prev != nil || lost != nil) && n.mini == nil {
		// The preferred IDs (the state file's, or the lost lease's) start
		// too far ahead of our clock (it was set back, or a loss floor is
		// ahead): give them back untouched and take others, as any claim
		// takes only IDs within max wait, whose reservations Redis keeps.
		// Not standalone: the embedded store knows no other reservation,
		// so others would start at no floor (standaloneClock keeps this
		// from happening).
		n.log.Warn().Ints("machine_ids", lease.MachineIDs()).Dur("behind", time.Duration(gap)*n.reg.Layout().TimeUnit).
			Msg("clock is behind the reservation of the preferred machine IDs; claiming others")
		_ = lease.Release(ctx, lease.Floor())
		lease, err = n.reg.Claim(ctx, coord.ClaimOptions{Count: n.opts.MachineIDs, State: n.state})
		if err != nil {
			return err
		}
	}
	n.lease = lease
	n.lost = nil
	n.claimErr = nil
	if fleet, own := n.reg.FleetHorizon(), n.reg.Options().Horizon; fleet < own && !n.warnedHorizon {
		n.warnedHorizon = true
		n.log.Warn().Dur("fleet_horizon", fleet).Dur("horizon", own).
			Msg("the fleet's horizon (set by flaked init) is shorter than this node's: its reservations are capped at it, so it rides out less of a Redis outage than --reserve-ahead says; give every node and flaked init the same --reserve-ahead, --max-lead and --max-skew")
	}
	if lease.DataLoss {
		n.alarms.dataLosses.Add(1)
	}
	if lease.Clone != "" {
		n.alarms.clones.Add(1)
		n.log.Error().Str("holder", lease.Clone).Str("state_file", n.opts.StateFile).Ints("machine_ids", lease.MachineIDs()).
			Msg("the state file's machine ID is held by a live process with the same state-file node ID: two processes run from copies of one state file; took other machine IDs")
	}
	lease.SetMode(n.modeLocked().String())
	lease.OnLost(n.kick)
	lease.KeepAlive()
	n.log.Info().Ints("machine_ids", lease.MachineIDs()).Strs("events", lease.ClaimEvents()).
		Int64("floor", lease.Floor()).Bool("data_loss", lease.DataLoss).Msg("machine IDs claimed")
	return nil
}

// dropLeaseLocked gives up the current lease (lost, or being replaced).
// The generator must be closed first.
func (n *Node) dropLeaseLocked(ctx context.Context) {
	if n.lease == nil {
		return
	}
	err := n.lease.Err()
	if err != nil {
		n.alarms.leasesLost.Add(1)
	}
	if errors.Is(err, coord.ErrFenced) {
		n.alarms.leasesFenced.Add(1)
		// Not a pause or a network fault: another process runs from a copy
		// of this node's state file. The fencing kept the IDs apart; the
		// operator must give one of them a state file of its own.
		n.log.Error().Err(err).Ints("machine_ids", n.lease.MachineIDs()).Str("state_file", n.opts.StateFile).
			Msg("lease fenced: two processes run from copies of one state file; claiming other machine IDs")
	} else if err != nil {
		n.log.Warn().Err(err).Ints("machine_ids", n.lease.MachineIDs()).Msg("lease lost")
	}
	if err != nil && !errors.Is(err, coord.ErrLayoutMismatch) && !errors.Is(err, coord.ErrFenced) {
		// Claimed again first when free: their floor is this node's own
		// reservation, where its IDs go on (an evicted lease key leaves
		// the machine ID free), rather than another node's reservation.
		// Not when fenced: a copy of the state file holds them.
		n.lost = n.lease.MachineIDs()
	}
	// Releasing a lost lease touches nothing in Redis (the scripts check
	// the token); it stops the keep-alive and records the last tick.
	_ = n.lease.Release(ctx, n.bound)
	n.lease = nil
}
