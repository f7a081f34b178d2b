package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flaked/flaked/coord"
)

// check is the health check the monitor runs every CheckInterval, and at
// once when the lease is lost: it switches modes when needed.
func (n *Node) check() {
	// Bounded, so a Redis that does not answer cannot hold n.mu.
	ctx, cancel := context.WithTimeout(context.Background(), max(time.Second, n.opts.CheckInterval))
	defer cancel()
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.closed {
		n.checkLocked(ctx)
	}
}

// kick runs the health check as soon as possible. It takes no lock: the
// lease calls it when it finds itself lost, maybe inside a check.
func (n *Node) kick() {
	if m := n.monitor.Load(); m != nil {
		m.Kick()
	}
}

// checkLocked is one health check; n.mu is held. The counter, if it is
// the source, fetches now rather than at the first caller's request.
func (n *Node) checkLocked(ctx context.Context) {
	now := n.opts.Clock.Monotonic()
	cur := n.src.Load()
	n.reportStateFileLocked()
	if cur.ctr != nil {
		cur.ctr.Warm()
	}
	switch n.opts.Mode {
	case ModeCounter:
		// A counter node never switches.
	case ModeFlake:
		n.checkFlakeLocked(ctx, now)
	case ModeAuto:
		// Only auto mode switches, so only it has mode events to catch up
		// on between the start and Close (which tries once more).
		n.flushEventsLocked()
		if cur.mode == ModeFlake {
			n.checkAutoFlakeLocked(ctx, now)
		} else {
			n.checkAutoCounterLocked(ctx, now)
		}
	}
}

// checkFlakeLocked keeps flake mode going: a lost lease (or none, after a
// failed claim) is claimed again every RetryInterval; meanwhile NextID
// fails with ErrUnavailable.
func (n *Node) checkFlakeLocked(ctx context.Context, now time.Duration) {
	if n.generatorLocked() != nil && n.lease != nil && n.lease.Err() == nil && n.genLease == n.lease {
		return
	}
	if now < n.retryAt {
		return
	}
	if err := n.restartFlakeLocked(ctx, false); err != nil {
		n.retryAt = now + n.opts.RetryInterval
		if n.generatorLocked() == nil { // not while one drains a lost lease (drain.go)
			n.src.Store(&source{mode: ModeFlake, err: fmt.Errorf("%w: flake mode, reclaiming machine IDs: %w", ErrUnavailable, err)})
		}
	}
}

// checkAutoFlakeLocked falls back to counter mode when flake mode is not
// safe and a fresh lease does not make it so. A fresh lease whose
// generator would not issue at once (claimed again within a second of a
// Redis restart or failover: at the loss floor, which Redis does not grant
// past yet) would make every caller wait for it: counter mode serves them
// meanwhile.
func (n *Node) checkAutoFlakeLocked(ctx context.Context, now time.Duration) {
	reason := n.flakeUnsafeLocked(ctx, now)
	if reason == "" {
		if !n.drainingLocked() {
			return
		}
		reason = "the ticks granted under the lost lease are spent"
	}
	drains := n.drainingLocked() && n.drainLastsLocked()
	if drains && now < n.retryAt {
		return
	}
	err := n.restartFlakeLocked(ctx, true)
	if err == nil && n.flakeUnsafeLocked(ctx, now) == "" {
		return // a fresh lease fixed it (e.g. a lost lease reclaimed)
	}
	if err != nil && n.drainingLocked() && n.drainLastsLocked() {
		// The generator issues on under the lost lease's grant, as in
		// flake mode (drain.go), and the claim is tried again every
		// RetryInterval: counter mode takes over only when that grant is
		// nearly spent, so a claim refused for a while (a failover the
		// Sentinels have not all seen yet) costs no ID.
		n.claimErr = err
		n.retryAt = now + n.opts.RetryInterval
		return
	}
	if err != nil {
		reason += "; " + err.Error()
	}
	n.log.Warn().Str("reason", reason).Msg("flake mode is not safe; falling back to counter mode")
	if err := n.toCounterLocked(ctx, reason); err != nil {
		n.log.Error().Err(err).Msg("counter mode failed to start")
	}
}

// checkAutoCounterLocked returns to flake mode after RecoverAfter of
// health (hysteresis, so the node does not flap), trying at most every
// RetryInterval.
func (n *Node) checkAutoCounterLocked(ctx context.Context, now time.Duration) {
	if now < n.retryAt {
		return
	}
	if err := n.flakeReadyLocked(ctx); err != nil {
		n.healthy = 0
		n.claimErr = err
		n.retryAt = now + n.opts.RetryInterval
		return
	}
	if n.healthy == 0 {
		n.healthy = max(now, 1)
		n.log.Info().Ints("machine_ids", n.lease.MachineIDs()).Dur("recover_after", n.opts.RecoverAfter).
			Msg("flake mode looks healthy; returning after the recovery delay")
	}
	if now-n.healthy >= n.opts.RecoverAfter {
		if err := n.toFlakeLocked(ctx); err != nil {
			n.healthy = 0
			n.claimErr = err
			n.retryAt = now + n.opts.RetryInterval
			n.log.Warn().Err(err).Msg("returning to flake mode failed; staying in counter mode")
		}
	}
}

// reportStateFileLocked logs when the state file starts or stops failing
// to be written. With Redis the node goes on (Redis holds the
// reservations; the state file is a second copy); standalone, the lease
// grants nothing more until the file can be written.
func (n *Node) reportStateFileLocked() {
	if n.lease == nil {
		return
	}
	err := n.lease.Stats().StateErr
	switch {
	case err != nil && !n.stateFailing:
		ev := n.log.Error().Err(err).Str("state_file", n.opts.StateFile)
		if n.Standalone() {
			ev.Msg("state file cannot be written: standalone, it is the only record of the reservation, so no new ticks are reserved until it can")
		} else {
			ev.Msg("state file cannot be written: issuing on from Redis's reservations; a restart may take longer to reuse its machine IDs")
		}
	case err == nil && n.stateFailing:
		n.log.Info().Str("state_file", n.opts.StateFile).Msg("state file written again")
	}
	n.stateFailing = err != nil
}

// flakeUnsafeLocked says why the flake source must not go on, or "".
func (n *Node) flakeUnsafeLocked(ctx context.Context, now time.Duration) string {
	if n.lease == nil {
		return "no machine ID held"
	}
	if err := n.lease.Err(); err != nil {
		return err.Error()
	}
	st := n.src.Load().gen.Stats()
	if st.LastError != nil && st.Granted <= max(st.Now, st.Last) {
		return fmt.Sprintf("reservation spent at tick %d and not extended: %v", st.Granted, st.LastError)
	}
	if st.Floor-st.Now > n.maxW && st.Granted <= st.Floor {
		// Callers wait for the clock; past the floor's grant the generator
		// issues ahead of it instead (startFlakeLocked).
		return fmt.Sprintf("%v: clock at tick %d, floor %d, max wait %v", ErrClockBehind, st.Now, st.Floor, n.reg.Options().MaxWait)
	}
	if now >= n.skewAt {
		n.skewAt = now + max(n.opts.RetryInterval, 5*time.Second)
		if err := n.reg.CheckClock(ctx); errors.Is(err, coord.ErrClockSkew) {
			return err.Error()
		}
	}
	return ""
}

// flakeReadyLocked makes sure a healthy lease is held, for a return to
// flake mode: the clock agrees with Redis, a lease is held and renewed,
// and its generator would issue at once (startsNowLocked), so no caller
// waits after the return.
func (n *Node) flakeReadyLocked(ctx context.Context) error {
	if err := n.reg.CheckClock(ctx); err != nil {
		return err
	}
	if n.lease != nil && n.lease.Err() != nil {
		n.dropLeaseLocked(ctx)
	}
	if n.lease == nil {
		if err := n.claimLocked(ctx); err != nil {
			return err
		}
	}
	if err := n.lease.Renew(ctx); err != nil {
		return err
	}
	if !n.startsNowLocked(ctx) {
		// Back in flake mode every caller would wait for the clock.
		return n.notStartedLocked()
	}
	return nil
}
