package flake

import (
	"context"
	"fmt"
	"time"

	"github.com/flaked/flaked/clock"
)

// Reserving ahead of use, at the pace of the store.
//
// Reserve runs in the background, one call at a time, while NextID keeps
// issuing under what was already granted: a renewal in flight never stops
// issuing, and a caller that needs a tick above the grant waits for the
// renewal only as long as its context allows (the Redis call goes on and
// its grant serves the next caller). When the store is slow, two things
// follow its observed round trip (rtt, smoothed over recent calls):
//
//   - the renewal starts when what is left of the grant is less than
//     ReserveAhead less renewEvery (half of ReserveAhead when that is
//     more, or reserveRTTs round trips), so a store that goes away holds
//     the generator up for no less than that: all of the reach but a
//     second, at a renewal a second, which is what a long reach is for;
//   - each request reaches up to two round trips further than
//     ReserveAhead, but never past the clock + MaxLead + ReserveAhead (the
//     furthest a generator running ahead of the clock asked already), so
//     a grant that arrives a round trip after it was asked for still
//     covers the time until the next one arrives.
//
// Neither can make the generator issue past a grant: the reach only asks,
// and the store caps every grant at its clock + the fleet's horizon, which
// counts MaxLead + ReserveAhead already (a node's restart after a crash
// waits for the same reach, coord.Options.MaxWait). What a slow store
// cannot be ridden through: a reply slower than ReserveAhead + MaxLead,
// or none at all, once the grant held is spent.

// reserveRTTs is how many recent round trips of Reserve must be left of
// the grant when the next renewal starts.
const reserveRTTs = 3

// renewEvery is how much of the grant a renewal waits to extend: with a
// long ReserveAhead, one call per renewEvery of the clock.
const renewEvery = time.Second

// cappedEvery spaces background renewals while the store grants less than
// asked (its cap, its clock + the fleet's horizon, which a generator that
// started at a floor ahead of its clock runs against for a while): the cap
// moves with the store's clock, so a renewal every tick would gain a tick
// a call; one every cappedEvery gains as much of the clock.
const cappedEvery = 100 * time.Millisecond

// reservation is one background Reserve call: err is its outcome, set
// before task is done.
type reservation struct {
	task *clock.Task
	err  error
}

// rttTicks is the smoothed Reserve round trip in ticks, rounded up.
func (g *Generator) rttTicks() int64 {
	rtt := time.Duration(g.rtt.Load())
	return int64((rtt + g.layout.TimeUnit - 1) / g.layout.TimeUnit)
}

// want is how far a Reserve asks for when the generator is at front and
// the clock at now: ReserveAhead past front, and while round trips are
// long up to two of them further, but never past now + MaxLead +
// ReserveAhead, the furthest a generator ahead of the clock asked before.
func (g *Generator) want(front, now int64) int64 {
	return max(front+g.ahead, min(front+g.ahead+2*g.rttTicks(), now+g.leadTicks+g.ahead))
}

// margin is what is left of the grant when the next renewal starts.
func (g *Generator) margin() int64 {
	return max(g.ahead/2, g.ahead-int64(renewEvery/g.layout.TimeUnit), reserveRTTs*g.rttTicks())
}

// observe folds one Reserve round trip into the smoothed rtt: a slower
// one counts at once (the store slowed down), a faster one slowly.
func (g *Generator) observe(d time.Duration) {
	cur := time.Duration(g.rtt.Load())
	if d > cur {
		g.rtt.Store(int64(d))
		return
	}
	g.rtt.Store(int64((3*cur + d) / 4))
}

// maybePrefetch extends the grant in the background when less than
// margin is left, so NextID rarely waits on Reserve.
func (g *Generator) maybePrefetch() {
	if g.reserve == nil {
		return
	}
	// The tick of the next value: state+1, as nextSlow reads it, so that
	// a generator that has issued nothing on a never-reserved ID (state
	// is then Floor+1 ticks' first value - 1, which wraps for Floor -1)
	// asks for ReserveAhead, not the store's cap.
	front := max(g.now.Load(), g.tickOf(g.state.Load()+1))
	if g.granted.Load()-front > g.margin() {
		return
	}
	if c := g.capped.Load(); c != 0 && g.clock.Monotonic()-time.Duration(c-1) < cappedEvery {
		return
	}
	// Any progress will do: need is one past the current grant.
	g.startReserve(g.granted.Load()+1, g.want(front, g.now.Load()))
}

// startReserve returns the background Reserve in flight, starting one for
// ticks up to want (at least need) when none is; nil once closed.
func (g *Generator) startReserve(need, want int64) *reservation {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return nil
	}
	if g.fetching.Load() && g.prefetch != nil {
		return g.prefetch
	}
	g.fetching.Store(true)
	r := &reservation{}
	r.task = clock.Go(g.clock, func() {
		defer g.fetching.Store(false)
		r.err = g.reserveUpTo(g.ctx, need, want)
	})
	g.prefetch = r
	return r
}

// reserveWait waits for a background Reserve that may grant need, or for
// ctx: the caller's wait is bounded by its own context, never by the
// store's reply. nil means look again (granted, or another call is due).
func (g *Generator) reserveWait(ctx context.Context, need, want int64) error {
	r := g.startReserve(need, want)
	if r == nil {
		return ErrClosed
	}
	if !clock.FiresTimers(g.clock) {
		// A test's hand-driven clock runs no timer while the caller
		// waits: the caller makes the call itself.
		r.task.RunPending()
	}
	if err := r.task.Wait(ctx); err != nil {
		return fmt.Errorf("%w: waiting for tick %d (%s), a reservation in flight: %w", ErrReserve, need,
			g.layout.TickTime(need).Format(time.RFC3339Nano), err)
	}
	if g.granted.Load() >= need {
		return nil
	}
	if r.err != nil {
		return r.err
	}
	// That call asked for less (a prefetch started before the clock
	// moved on): the next loop starts one for need.
	return nil
}

// reserveUpTo asks Reserve for ticks up to want and fails unless at least
// need is granted. One call at a time; a caller that finds the grant already
// extended by another returns at once.
func (g *Generator) reserveUpTo(ctx context.Context, need, want int64) error {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for tick %d: %w", ErrReserve, need, ctx.Err())
	}
	defer func() { <-g.sem }()
	if g.granted.Load() >= need {
		return nil
	}
	if g.closed.Load() {
		return ErrClosed
	}
	g.reserves.Add(1)
	start := g.clock.Monotonic()
	got, err := g.reserve(ctx, want)
	end := g.clock.Monotonic()
	g.observe(end - start)
	if err != nil {
		err = g.reserveFailed(need, err)
		g.mu.Lock()
		g.lastErr = err
		g.mu.Unlock()
		return err
	}
	// What the store granted is durable, also when it is short (a store
	// capped at its clock + a horizon); a short grant is not a failure of
	// the store, so it clears lastErr too.
	capped := int64(0)
	if got < want {
		capped = int64(end) + 1
	}
	g.capped.Store(capped)
	for {
		cur := g.granted.Load()
		if got <= cur || g.granted.CompareAndSwap(cur, got) {
			break
		}
	}
	g.mu.Lock()
	g.lastErr = nil
	g.mu.Unlock()
	g.updateLimit()
	if got < need {
		return g.reserveFailed(need, fmt.Errorf("granted up to tick %d, need %d", got, need))
	}
	return nil
}

// reserveFailed counts a Reserve that did not grant need and says why.
func (g *Generator) reserveFailed(need int64, err error) error {
	g.reserveErrs.Add(1)
	return fmt.Errorf("%w: tick %d (%s): %w", ErrReserve, need,
		g.layout.TickTime(need).Format(time.RFC3339Nano), err)
}
