package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
)

// Errors of a node.
var (
	// ErrInvalidOptions is wrapped by option errors.
	ErrInvalidOptions = errors.New("invalid node options")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("node is closed")
	// ErrClockBehind is wrapped when the clock is behind the floor of the
	// machine IDs this node could claim by more than MaxWait.
	ErrClockBehind = errors.New("clock is behind the machine ID's reservation")
	// ErrUnavailable is wrapped when the node has nothing to issue from:
	// in flake mode no lease is held, and it is being claimed again.
	ErrUnavailable = errors.New("no ID source available")
)

// Defaults of Options.
const (
	DefaultCheckInterval = 100 * time.Millisecond
	DefaultRecoverAfter  = 3 * time.Second
	DefaultRetryInterval = time.Second
	MaxMachineIDs        = 256
)

// Options configure a Node. The zero value is a standalone node in flake
// mode with one machine ID and no state file.
type Options struct {
	// Redis is the fleet's Redis; nil runs standalone on an embedded
	// in-process store (miniredis): then the state file is what keeps
	// restarts unique, so set StateFile.
	Redis redis.UniversalClient
	// Registry configures the machine-ID registry (namespace, layout,
	// lease TTL, max skew, max wait, owner). Its Horizon defaults to
	// MaxLead + ReserveAhead + MaxSkew + one tick, and must be at least
	// that. Its MaxWait (default max(Horizon, MaxLead + ReserveAhead +
	// a tick) + 2s, so a fresh registry or a restart after a crash is
	// waited for) is also how far the clock may be behind the floor of
	// the machine IDs a node takes: beyond it the state file's IDs are
	// given back for others, and auto mode falls back to counter.
	Registry coord.Options
	// Counter tunes counter mode (segment sizes, lead); its namespace,
	// layout and clock come from Registry.
	Counter fallback.Options
	// StateFile is the local state file ("" for none: restarts then rely
	// on Redis alone).
	StateFile string
	// Mode is ModeFlake (default), ModeCounter or ModeAuto.
	Mode string
	// MachineIDs is how many machine IDs to lease: 1..256, default 1. A
	// node with k IDs interleaves them and issues k times one ID's rate.
	MachineIDs int
	// MaxLead bounds how far ahead of the clock IDs may run: default 1s.
	MaxLead time.Duration
	// ReserveAhead is how far ahead each reservation reaches: default 2s.
	ReserveAhead time.Duration
	// CheckInterval is how often the node checks its health (lease,
	// reservation, clock) to switch modes: 10ms..1m, default 100ms.
	CheckInterval time.Duration
	// RecoverAfter is how long flake mode must look healthy before a node
	// in auto mode leaves counter mode (hysteresis, so it does not flap):
	// 0..1h, default 3s.
	RecoverAfter time.Duration
	// RetryInterval spaces attempts to claim machine IDs after a failure:
	// 10ms..1m, default 1s.
	RetryInterval time.Duration
	// Clock drives everything that takes time: the generator, the clock
	// guard, lease renewals, counter mode, the health checks and every
	// wait; nil means the system clock. The simulator (package sim) runs
	// whole nodes on its virtual one.
	Clock flake.Clock
	// StateFS holds the state file; nil means the operating system's
	// (coord.OSFS). The simulator keeps state files in memory.
	StateFS coord.StateFS
	// Rand is the source of owner tokens, state-file node IDs and the
	// machine IDs a claim tries; nil means crypto/rand.
	Rand io.Reader
	// Logger receives mode switches, lease losses and claims.
	Logger zerolog.Logger
}

// source is what IDs are issued from at one time: a flake generator, the
// counter, or neither (err says why).
type source struct {
	mode string
	gen  *flake.Generator
	ctr  *fallback.Counter
	err  error
}

// Node is one flaked node: leases on machine IDs, a flake generator and
// the counter fallback, behind one Generator.
type Node struct {
	src atomic.Pointer[source] // what NextID issues from

	opts  Options
	log   zerolog.Logger
	mini  *miniredis.Miniredis
	rdb   redis.UniversalClient
	reg   *coord.Registry
	state *coord.StateFile
	prev  *coord.State // the state file as opened
	maxW  int64        // MaxWait in ticks

	// mu serializes mode switches and lease changes; NextID takes it only
	// to wait out a switch.
	mu     sync.Mutex
	lease  *coord.Lease
	gen    *flake.Generator
	ctr    *fallback.Counter
	bound  int64 // highest tick any ID issued so far may have
	closed bool
	reason string // why the current mode was entered
	// healthy, retryAt, skewAt and flushAt are readings of the clock's
	// Monotonic, so a wall-clock step does not stretch or skip them.
	healthy      time.Duration // counter mode: since when flake looks healthy (0: not)
	retryAt      time.Duration // no claim attempt before this
	skewAt       time.Duration // next clock-guard check in auto mode
	claimErr     error         // the last claim failure
	stateFailing bool          // the state file could not be written, as last logged
	pending      [][]any       // mode events not written yet (Redis away)
	flushAt      time.Duration // no attempt to write them before this
	switches     atomic.Uint64
	lastMode     atomic.Pointer[string]
	monitor      atomic.Pointer[flake.Ticker] // the health checks
}

var _ TryGenerator = (*Node)(nil)

func (o *Options) withDefaults() error {
	if o.Mode == "" {
		o.Mode = ModeFlake
	}
	if o.Mode != ModeFlake && o.Mode != ModeCounter && o.Mode != ModeAuto {
		return fmt.Errorf("%w: mode %q: want %s, %s or %s", ErrInvalidOptions, o.Mode, ModeFlake, ModeCounter, ModeAuto)
	}
	if o.MachineIDs == 0 {
		o.MachineIDs = 1
	}
	if o.MachineIDs < 1 || o.MachineIDs > MaxMachineIDs {
		return fmt.Errorf("%w: machine IDs %d: valid range is 1..%d", ErrInvalidOptions, o.MachineIDs, MaxMachineIDs)
	}
	if o.MaxLead == 0 {
		o.MaxLead = flake.DefaultMaxLead
	}
	if o.ReserveAhead == 0 {
		o.ReserveAhead = flake.DefaultReserveAhead
	}
	if o.MaxLead < 0 || o.MaxLead > time.Hour {
		return fmt.Errorf("%w: max lead %v: valid range is 0..1h", ErrInvalidOptions, o.MaxLead)
	}
	if o.ReserveAhead < 10*time.Millisecond || o.ReserveAhead > time.Hour {
		return fmt.Errorf("%w: reserve ahead %v: valid range is 10ms..1h", ErrInvalidOptions, o.ReserveAhead)
	}
	durations := []struct {
		v       *time.Duration
		def     time.Duration
		lo, hi  time.Duration
		name    string
		zeroDef bool
	}{
		{&o.CheckInterval, DefaultCheckInterval, 10 * time.Millisecond, time.Minute, "check interval", true},
		{&o.RecoverAfter, DefaultRecoverAfter, 0, time.Hour, "recover after", true},
		{&o.RetryInterval, DefaultRetryInterval, 10 * time.Millisecond, time.Minute, "retry interval", true},
	}
	for _, d := range durations {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < d.lo || *d.v > d.hi {
			return fmt.Errorf("%w: %s %v: valid range is %v..%v", ErrInvalidOptions, d.name, *d.v, d.lo, d.hi)
		}
	}
	if o.Clock == nil {
		o.Clock = flake.SystemClock()
	}
	return nil
}

// New starts a node. In flake mode it claims machine IDs (preferring the
// state file's) and fails when it cannot; in counter mode it holds no
// lease; in auto mode it starts in counter mode when flake mode is not
// safe, and keeps trying to return.
func New(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, log: opts.Logger, rdb: opts.Redis, bound: -1}
	ro := opts.Registry
	if ro.Clock == nil {
		ro.Clock = opts.Clock
	}
	if ro.Rand == nil {
		ro.Rand = opts.Rand
	}
	if ro.Owner.Mode == "" {
		ro.Owner.Mode = opts.Mode
		if opts.Mode == ModeAuto {
			ro.Owner.Mode = ModeFlake
		}
	}
	if n.rdb == nil {
		// Standalone: this process is the only one that can ever see this
		// store, and the state file holds the only reservation that
		// matters, so the data-loss horizon is not needed.
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("standalone store: %w", err)
		}
		n.mini = mr
		n.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		ro.Private = true
	}
	if ro.Layout.BitsTime == 0 {
		ro.Layout = flake.DefaultLayout()
	}
	minHorizon := opts.MaxLead + opts.ReserveAhead + max(ro.MaxSkew, coord.DefaultMaxSkew) + ro.Layout.TimeUnit
	if ro.Horizon == 0 {
		ro.Horizon = minHorizon
	}
	if ro.MaxWait == 0 {
		// A registry created a moment ago (a new fleet, or Redis that lost
		// its data) starts every ID a horizon ahead, and a node restarted
		// after a crash finds its own reservation up to max lead + reserve
		// ahead ahead of its clock: wait for either.
		ro.MaxWait = max(ro.Horizon, opts.MaxLead+opts.ReserveAhead+ro.Layout.TimeUnit) + coord.DefaultMaxWait
	}
	if n.mini == nil && ro.Horizon < minHorizon {
		n.cleanup()
		return nil, fmt.Errorf("%w: horizon %v is below max lead + reserve ahead + max skew + a tick = %v",
			ErrInvalidOptions, ro.Horizon, minHorizon)
	}
	reg, err := coord.NewRegistry(n.rdb, ro)
	if err != nil {
		n.cleanup()
		return nil, err
	}
	n.reg = reg
	if n.mini != nil {
		if err := reg.PrepareFresh(ctx); err != nil {
			n.cleanup()
			return nil, fmt.Errorf("standalone store: %w", err)
		}
	}
	n.maxW = int64(reg.Options().MaxWait / reg.Layout().TimeUnit)
	co := opts.Counter
	co.Namespace, co.Layout, co.Clock, co.Rand = reg.Options().Namespace, reg.Layout(), opts.Clock, reg.Options().Rand
	co.LayoutSettle = reg.Options().LayoutSettle // none when private
	if co.Host == "" {
		co.Host, co.PID = reg.Options().Owner.Host, reg.Options().Owner.PID
	}
	n.opts.Counter = co
	c, err := fallback.New(n.rdb, co) // validate now, not at the first fallback
	if err != nil {
		n.cleanup()
		return nil, err
	}
	c.Close()
	if opts.StateFile != "" {
		n.state, n.prev, err = coord.OpenStateFS(opts.StateFS, opts.StateFile, reg.Options().Rand)
		if err != nil {
			n.cleanup()
			return nil, err
		}
	}

	n.mu.Lock()
	switch opts.Mode {
	case ModeCounter:
		err = n.toCounterLocked(ctx, "mode counter")
	case ModeFlake:
		err = n.startFlakeLocked(ctx)
	case ModeAuto:
		if err = n.startFlakeLocked(ctx); err != nil && fallsBack(err) {
			n.log.Warn().Err(err).Msg("flake mode is not safe at start; issuing in counter mode")
			err = n.toCounterLocked(ctx, err.Error())
		}
	}
	if err == nil && n.lastMode.Load() == nil {
		n.setMode(n.src.Load().mode, "start")
	}
	n.mu.Unlock()
	if err != nil {
		n.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	n.monitor.Store(flake.Every(opts.Clock, opts.CheckInterval, n.check))
	return n, nil
}

// fallsBack reports whether err is a reason for auto mode to issue in
// counter mode rather than fail: flake mode is unsafe for now. A wrong
// configuration (layout, options, state file) is not.
func fallsBack(err error) bool {
	switch {
	case errors.Is(err, coord.ErrLayoutMismatch), errors.Is(err, coord.ErrInvalidOptions),
		errors.Is(err, coord.ErrStateCorrupt), errors.Is(err, coord.ErrStateMismatch),
		errors.Is(err, coord.ErrStateLocked), errors.Is(err, ErrClosed):
		return false
	}
	return true
}

func (n *Node) cleanup() {
	if n.state != nil {
		n.state.Close()
	}
	if n.mini != nil {
		n.rdb.Close()
		n.mini.Close()
	}
}

// NextID returns the next ID, from the current mode's source.
func (n *Node) NextID(ctx context.Context) (uint64, error) {
	for {
		s := n.src.Load()
		var id uint64
		var err error
		switch {
		case s.gen != nil:
			id, err = s.gen.NextIDContext(ctx)
		case s.ctr != nil:
			id, err = s.ctr.NextID(ctx)
		default:
			err = s.err
		}
		if err == nil {
			return id, nil
		}
		if !n.again(ctx, s, err) {
			return 0, err
		}
	}
}

// TryNextIDs fills dst with strictly increasing IDs if the current source
// can issue all of them at once, and reports whether it did. It never
// waits on the clock or Redis; when it reports false nothing was issued,
// and NextIDs (which may wait, switch modes or fail) is the way on. The
// daemon's event loops call it so that one waiting client cannot stall the
// others.
func (n *Node) TryNextIDs(dst []uint64) bool {
	s := n.src.Load()
	switch {
	case s.gen != nil:
		return s.gen.TryNextIDs(dst)
	case s.ctr != nil:
		return s.ctr.TryNextIDs(dst)
	}
	return false
}

// NextIDs fills dst with strictly increasing IDs and returns how many it
// filled: len(dst), or fewer with an error.
func (n *Node) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	filled := 0
	for filled < len(dst) {
		s := n.src.Load()
		var got int
		var err error
		switch {
		case s.gen != nil:
			got, err = s.gen.NextIDs(ctx, dst[filled:])
		case s.ctr != nil:
			got, err = s.ctr.NextIDs(ctx, dst[filled:])
		default:
			err = s.err
		}
		filled += got
		if err != nil && !n.again(ctx, s, err) {
			return filled, err
		}
	}
	return filled, nil
}

// again runs when source s failed with err: it reports whether the caller
// should retry on a newer source. A source closed by a mode switch is
// retried once the switch is done. In auto mode a flake source that cannot
// issue (reservation refused, clock behind) is checked at once, so the
// caller gets a counter-mode ID rather than the error when falling back is
// right.
func (n *Node) again(ctx context.Context, s *source, err error) bool {
	if n.src.Load() != s {
		return true
	}
	if errors.Is(err, flake.ErrClosed) || errors.Is(err, fallback.ErrClosed) {
		n.mu.Lock() // wait out the switch that closed s
		n.mu.Unlock()
		return n.src.Load() != s
	}
	if n.opts.Mode != ModeAuto || s.gen == nil || ctx.Err() != nil {
		return false
	}
	n.mu.Lock()
	if n.src.Load() == s && !n.closed {
		n.checkLocked(ctx)
	}
	n.mu.Unlock()
	return n.src.Load() != s
}

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

// checkLocked is one health check; n.mu is held.
func (n *Node) checkLocked(ctx context.Context) {
	now := n.opts.Clock.Monotonic()
	cur := n.src.Load()
	n.reportStateFileLocked()
	if cur.ctr != nil {
		cur.ctr.Warm() // a fetch now, not at the first caller's request
	}
	switch n.opts.Mode {
	case ModeCounter:
		return
	case ModeFlake:
		if n.gen != nil && n.lease != nil && n.lease.Err() == nil {
			return
		}
		if now < n.retryAt {
			return
		}
		if err := n.restartFlakeLocked(ctx); err != nil {
			n.retryAt = now + n.opts.RetryInterval
			n.src.Store(&source{mode: ModeFlake, err: fmt.Errorf("%w: flake mode, reclaiming machine IDs: %w", ErrUnavailable, err)})
		}
		return
	}
	n.flushEventsLocked()
	// Auto.
	if cur.mode == ModeFlake {
		if reason := n.flakeUnsafeLocked(ctx, now); reason != "" {
			if err := n.restartFlakeLocked(ctx); err == nil && n.flakeUnsafeLocked(ctx, now) == "" {
				return // a fresh lease fixed it (e.g. a lost lease reclaimed)
			} else if err != nil {
				reason += "; " + err.Error()
			}
			n.log.Warn().Str("reason", reason).Msg("flake mode is not safe; falling back to counter mode")
			if err := n.toCounterLocked(ctx, reason); err != nil {
				n.log.Error().Err(err).Msg("counter mode failed to start")
			}
		}
		return
	}
	// Auto, in counter mode: return to flake after RecoverAfter of health.
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
	st := n.gen.Stats()
	if st.LastErr != nil && st.Granted <= max(st.Now, st.Last) {
		return fmt.Sprintf("reservation spent at tick %d and not extended: %v", st.Granted, st.LastErr)
	}
	if st.Floor-st.Now > n.maxW {
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
// and the clock is within MaxWait of where the generator would start.
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
	if gap := n.floorLocked() - n.clockTick(); gap > n.maxW {
		return fmt.Errorf("%w: by %v, max wait %v", ErrClockBehind, time.Duration(gap)*n.reg.Layout().TimeUnit,
			n.reg.Options().MaxWait)
	}
	return nil
}

func (n *Node) clockTick() int64 { return n.reg.Layout().Tick(n.opts.Clock.Now()) }

// floorLocked is the tick a new generator must start after.
func (n *Node) floorLocked() int64 { return max(n.lease.Floor(), n.bound) }

// claimLocked claims machine IDs; in auto mode it does not wait for IDs
// further ahead than MaxWait, and drops a preferred one that is.
func (n *Node) claimLocked(ctx context.Context) error {
	prev := n.prev
	n.prev = nil // the state file's IDs are preferred once
	lease, err := n.reg.Claim(ctx, coord.ClaimOptions{Count: n.opts.MachineIDs, State: n.state, Previous: prev})
	if err != nil {
		return err
	}
	if gap := max(lease.Floor(), n.bound) - n.clockTick(); gap > n.maxW && prev != nil {
		// The state file's IDs start too far ahead of our clock (it was
		// set back): give them back untouched and take others.
		n.log.Warn().Ints("machine_ids", lease.MachineIDs()).Dur("behind", time.Duration(gap)*n.reg.Layout().TimeUnit).
			Msg("clock is behind the reservation of the state file's machine IDs; claiming others")
		_ = lease.Release(ctx, lease.Floor())
		lease, err = n.reg.Claim(ctx, coord.ClaimOptions{Count: n.opts.MachineIDs, State: n.state})
		if err != nil {
			return err
		}
	}
	n.lease = lease
	n.claimErr = nil
	if lease.Clone != "" {
		n.log.Error().Str("holder", lease.Clone).Str("state_file", n.opts.StateFile).Ints("machine_ids", lease.MachineIDs()).
			Msg("the state file's machine ID is held by a live process with the same state-file node ID: two processes run from copies of one state file; took other machine IDs")
	}
	lease.SetMode(n.modeName())
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
	if err := n.lease.Err(); errors.Is(err, coord.ErrFenced) {
		// Not a pause or a network fault: another process runs from a copy
		// of this node's state file. The fencing kept the IDs apart; the
		// operator must give one of them a state file of its own.
		n.log.Error().Err(err).Ints("machine_ids", n.lease.MachineIDs()).Str("state_file", n.opts.StateFile).
			Msg("lease fenced: two processes run from copies of one state file; claiming other machine IDs")
	} else if err != nil {
		n.log.Warn().Err(err).Ints("machine_ids", n.lease.MachineIDs()).Msg("lease lost")
	}
	// Releasing a lost lease touches nothing in Redis (the scripts check
	// the token); it stops the keep-alive and records the last tick.
	_ = n.lease.Release(ctx, n.bound)
	n.lease = nil
}

// startFlakeLocked claims machine IDs when none are held and starts a
// generator after everything issued so far.
func (n *Node) startFlakeLocked(ctx context.Context) error {
	if n.lease == nil {
		if err := n.claimLocked(ctx); err != nil {
			return err
		}
	}
	floor := n.floorLocked()
	if gap := floor - n.clockTick(); gap > n.maxW {
		return fmt.Errorf("%w: machine IDs %v start at tick %d (%s), %v ahead of this clock, max wait %v; fix the clock or run in auto mode",
			ErrClockBehind, n.lease.MachineIDs(), floor+1, n.reg.Layout().TickTime(floor+1).Format(time.RFC3339Nano),
			time.Duration(gap)*n.reg.Layout().TimeUnit, n.reg.Options().MaxWait)
	}
	l := n.reg.Layout()
	gen, err := flake.New(flake.Settings{
		BitsSequence: l.BitsSequence, BitsMachineID: l.BitsMachineID, TimeUnit: l.TimeUnit, StartTime: l.StartTime,
		MachineIDs: n.lease.MachineIDs(), MaxLead: n.opts.MaxLead,
		Floor: floor, Reserved: n.lease.Granted(), Reserve: n.lease.Reserve, ReserveAhead: n.opts.ReserveAhead,
		Clock: n.opts.Clock,
	})
	if err != nil {
		return err
	}
	n.gen = gen
	n.src.Store(&source{mode: ModeFlake, gen: gen})
	return nil
}

// stopFlakeLocked closes the generator; everything it issued is then
// below n.bound.
func (n *Node) stopFlakeLocked() {
	if n.gen != nil {
		n.bound = max(n.bound, n.gen.Close())
		n.gen = nil
	}
}

// restartFlakeLocked replaces a lost (or missing) lease and its generator,
// staying in flake mode.
func (n *Node) restartFlakeLocked(ctx context.Context) error {
	if n.lease != nil && n.lease.Err() != nil {
		n.stopFlakeLocked()
		n.dropLeaseLocked(ctx)
	}
	if n.gen != nil {
		return nil
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
	ctr, err := fallback.New(n.rdb, n.opts.Counter)
	if err != nil {
		return err
	}
	if n.bound >= 0 {
		l := n.reg.Layout()
		ceiling, _ := l.Compose(n.bound, l.MaxSequence(), l.CounterMachineID())
		ctr.SetFloor(ceiling)
	}
	n.ctr = ctr
	n.reason = reason
	n.healthy = 0
	ctr.Warm()
	n.src.Store(&source{mode: ModeCounter, ctr: ctr})
	if n.lease != nil {
		n.lease.SetMode(ModeCounter)
	}
	n.setMode(ModeCounter, reason)
	return nil
}

// toFlakeLocked returns from counter mode: the counter stops, and the
// generator starts above everything it issued.
func (n *Node) toFlakeLocked(ctx context.Context) error {
	ctr := n.ctr
	if ctr != nil {
		// Close first, so LastTick is final; on failure below the node
		// goes on with a new counter.
		ctr.Close()
		n.bound = max(n.bound, ctr.LastTick())
		n.ctr = nil
	}
	if err := n.startFlakeLocked(ctx); err != nil {
		_ = n.toCounterLocked(ctx, n.reason)
		return err
	}
	n.lease.SetMode(ModeFlake)
	n.reason = "healthy for " + n.opts.RecoverAfter.String()
	n.setMode(ModeFlake, n.reason)
	return nil
}

// setMode logs a mode change and writes it to the audit stream.
func (n *Node) setMode(mode, reason string) {
	from := "none"
	if p := n.lastMode.Load(); p != nil {
		from = *p
	}
	n.lastMode.Store(&mode)
	if from == mode {
		return
	}
	mid := n.reg.Layout().CounterMachineID()
	if n.lease != nil {
		mid = n.lease.MachineIDs()[0]
	}
	ev := n.log.Info()
	if from != "none" && mode != "stopped" {
		n.switches.Add(1)
		ev = n.log.Warn()
	}
	ev.Str("from", from).Str("to", mode).Str("reason", reason).Int("machine_id", mid).Msg("mode")
	n.pending = append(n.pending, []any{mid, "from", from, "to", mode, "reason", reason,
		"at_ms", n.opts.Clock.Now().UnixMilli()})
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
		err := n.reg.Event(ctx, "mode", ev[0].(int), ev[1:]...)
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

func (n *Node) modeName() string {
	if p := n.lastMode.Load(); p != nil {
		return *p
	}
	return n.opts.Mode
}

// Mode returns the mode IDs are issued in now: ModeFlake or ModeCounter.
func (n *Node) Mode() string { return n.src.Load().mode }

// ConfiguredMode returns the mode the node was started with.
func (n *Node) ConfiguredMode() string { return n.opts.Mode }

// Layout returns the fleet layout.
func (n *Node) Layout() flake.Layout { return n.reg.Layout() }

// MachineIDs returns the leased machine IDs (none in counter mode without
// a lease).
func (n *Node) MachineIDs() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lease == nil {
		return nil
	}
	return n.lease.MachineIDs()
}

// Standalone reports whether the node runs on the embedded store.
func (n *Node) Standalone() bool { return n.mini != nil }

// Lease returns the node's current lease, or nil (for audit and tests).
func (n *Node) Lease() *coord.Lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease
}

// Switches returns how many times the node changed modes.
func (n *Node) Switches() uint64 { return n.switches.Load() }

// Ready reports whether IDs can be issued now: in flake mode the lease is
// held and the reservation has headroom or can be extended; in counter
// mode the last fetch from Redis succeeded.
func (n *Node) Ready() bool {
	s := n.src.Load()
	switch {
	case s.gen != nil:
		// Not ready while the next IDs would wait for the clock: a floor
		// (a fresh registry's horizon, a restart after a crash) more than
		// MaxLead ahead of it.
		st := s.gen.Stats()
		lead := int64(n.opts.MaxLead / n.reg.Layout().TimeUnit)
		return !st.Closed && st.Floor-st.Now <= lead && (st.LastErr == nil || st.Headroom > 0)
	case s.ctr != nil:
		// Ready when IDs are buffered, or the last fetch from Redis worked.
		st := s.ctr.Stats()
		return st.Buffered > 0 || (st.SegmentsFetched > 0 && st.LastError == nil)
	}
	return false
}

// Info returns INFO pairs.
func (n *Node) Info() [][2]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.src.Load()
	standalone := "no"
	if n.Standalone() {
		standalone = "yes"
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	// mode and layout: the server adds them (Mode, Layout).
	out := [][2]string{
		{"mode_configured", n.opts.Mode},
		{"mode_reason", n.reason},
		{"mode_switches", strconv.FormatUint(n.switches.Load(), 10)},
		{"standalone", standalone},
		{"namespace", n.reg.Options().Namespace},
		{"state_file", n.opts.StateFile},
	}
	ids := ""
	if n.lease != nil {
		parts := make([]string, 0, len(n.lease.MachineIDs()))
		for _, m := range n.lease.MachineIDs() {
			parts = append(parts, strconv.Itoa(m))
		}
		ids = strings.Join(parts, ",")
	}
	out = append(out, [2]string{"machine_ids", ids})
	if s.gen != nil {
		st := s.gen.Stats()
		out = append(out,
			[2]string{"tick_now", strconv.FormatInt(st.Now, 10)},
			[2]string{"tick_last", strconv.FormatInt(st.Last, 10)},
			[2]string{"tick_reserved", strconv.FormatInt(st.Granted, 10)},
			[2]string{"tick_floor", strconv.FormatInt(st.Floor, 10)},
			[2]string{"lead_ms", strconv.FormatInt(st.Lead.Milliseconds(), 10)},
			[2]string{"reservation_headroom_ms", strconv.FormatInt(st.Headroom.Milliseconds(), 10)},
			[2]string{"nextid_waits", strconv.FormatUint(st.Waits, 10)},
			[2]string{"reserve_errors", strconv.FormatUint(st.ReserveErrs, 10)},
		)
	}
	if s.ctr != nil {
		cs := s.ctr.Stats()
		out = append(out,
			[2]string{"counter_segments", strconv.FormatUint(cs.SegmentsFetched, 10)},
			[2]string{"counter_segment_size", strconv.Itoa(cs.SegmentSize)},
			[2]string{"counter_buffered", strconv.FormatInt(cs.Buffered, 10)},
			[2]string{"counter_waits", strconv.FormatUint(cs.Waits, 10)},
			[2]string{"counter_fetch_errors", strconv.FormatUint(cs.FetchErrors, 10)},
			[2]string{"counter_last_error", errText(cs.LastError)},
		)
	}
	if n.lease != nil {
		ls := n.lease.Stats()
		out = append(out,
			[2]string{"state_file_error", errText(ls.StateErr)},
			[2]string{"lease_renewals", strconv.FormatUint(ls.Renews, 10)},
			[2]string{"lease_renewal_failures", strconv.FormatUint(ls.RenewFails, 10)},
			[2]string{"lease_lost", strconv.FormatBool(ls.Lost)},
			[2]string{"lease_last_error", errText(ls.LastErr)},
		)
	}
	out = append(out, [2]string{"claim_last_error", errText(n.claimErr)})
	return out
}

// Close stops issuing, releases the leases with the exact last tick and
// flushes the state file. It is safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.src.Store(&source{mode: n.modeName(), err: ErrClosed})
	if m := n.monitor.Load(); m != nil {
		m.Stop() // a check that starts now sees closed
	}
	defer n.mu.Unlock()
	n.stopFlakeLocked()
	if n.ctr != nil {
		n.ctr.Close()
		n.ctr = nil
	}
	// A "stopped" mode event tells audit (whois of counter IDs, history)
	// when this node stopped issuing; one last try for what is pending.
	n.flushAt = 0
	n.setMode("stopped", "close")
	var err error
	if n.lease != nil {
		err = n.lease.Release(ctx, n.bound)
		n.lease = nil
	}
	n.cleanup()
	return err
}
