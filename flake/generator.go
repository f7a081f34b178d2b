package flake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/internal/bugs"
)

// Defaults of the generator.
const (
	DefaultMaxLead      = time.Second
	DefaultReserveAhead = 2 * time.Second
)

// Errors of the generator.
var (
	ErrOverTimeLimit = errors.New("over the time limit of the layout")
	ErrMaxLead       = errors.New("generator is max-lead ahead of the clock")
	ErrReserve       = errors.New("reservation not granted")
	ErrClosed        = errors.New("generator is closed")
	ErrInvalidFloor  = errors.New("invalid floor")
	ErrInvalidLead   = errors.New("invalid max lead")
)

// Settings configures a Generator. The zero value is the default layout with
// machine ID 0, no reservation hook and the system clock.
type Settings struct {
	// BitsID is the width of the IDs: 53..63, 0 means 63. 53 keeps every
	// ID below 2^53, which JavaScript's numbers hold exactly; the time bits
	// are what it costs.
	BitsID int
	// BitsSequence is the bit length of the sequence: 1..30, 0 means 8.
	BitsSequence int
	// BitsMachineID is the bit length of the machine ID: 1..30, 0 means 16.
	// BitsID - BitsSequence - BitsMachineID (the time bits) must be >= 32.
	BitsMachineID int
	// TimeUnit is the length of a tick: >= 1 ms, 0 means 10 ms.
	TimeUnit time.Duration
	// StartTime is the epoch: not after now; zero means 2025-01-01 UTC.
	StartTime time.Time
	// BitsRegion, when not 0, carves a region from the top of the machine
	// ID: 0..BitsMachineID-1. Region is this generator's, 0..2^BitsRegion-1;
	// it uses only machine IDs of its region.
	BitsRegion int
	Region     int

	// MachineID is the machine ID: 0..2^BitsMachineID-2 (with regions, of
	// the region: Layout.MinMachineID..MaxMachineID). The last ID of the
	// region, Layout.CounterMachineID, is reserved for counter mode.
	MachineID int
	// MachineIDs, when not empty, replaces MachineID: the generator
	// interleaves them inside each (tick, sequence) step in ascending order,
	// so its IDs stay strictly increasing at len(MachineIDs) times the rate
	// of one machine ID. Each must be in MachineID's range; no repeats.
	MachineIDs []int

	// MaxLead bounds how far ahead of the clock the generator may run when
	// a tick's sequence is used up: >= 0, 0 means 1 s. Less than one
	// TimeUnit means it never runs ahead. A generator whose Floor is ahead
	// of the clock starts at Floor+1 as soon as Reserve granted it (or
	// Reserved covers it), not when the clock nears it, and may then run
	// as far ahead as it started plus MaxLead, within what Reserve grants
	// (a store caps that at its clock + a horizon), giving the start back
	// at half the clock's pace (runLimit).
	MaxLead time.Duration

	// Floor is the last tick the generator must not use, typically the
	// previous owner's reservation: every ID has a tick > Floor. >= -1.
	Floor int64
	// Reserved is the highest tick already granted when the generator
	// starts (only meaningful with Reserve).
	Reserved int64
	// Reserve, when set, is called before the generator enters a tick above
	// its grant. It asks for ticks up to upTo and returns the highest tick
	// granted, made durable before it returns. A grant below the tick the
	// generator needs, or an error, means NextID fails with ErrReserve once
	// the current grant is used up; IDs are never issued past a grant.
	// A caller asks for a tick only once it is within MaxLead of the
	// clock (a store grants up to its own clock + a horizon): before,
	// NextID waits for the clock. It is called from one goroutine at a
	// time, mostly in the background.
	Reserve func(ctx context.Context, upTo int64) (granted int64, err error)
	// ReserveAhead is how far ahead of the clock each Reserve asks for:
	// >= one TimeUnit, 0 means 2 s. A new grant is requested when less
	// than all of it but a second is left (half of it when that is more),
	// or less than a few recent Reserve round trips; while Reserve is slow
	// each asks up to two round trips further (reserve.go).
	ReserveAhead time.Duration

	// Clock is the source of time; nil means clock.System().
	Clock clock.Clock
}

// Generator issues IDs. It is safe for concurrent use; its NextID takes no
// lock and reads no clock.
type Generator struct {
	// state is the last value handed out, packed as
	// tick*perTick + sequence*k + machine index. It sits alone on its
	// cache line: it is the only word every NextID writes.
	_     [64]byte
	state atomic.Uint64
	_     [56]byte
	now   atomic.Int64 // current tick, refreshed by a timer and by slow paths
	limit atomic.Int64 // highest tick that may be issued: min(granted, now+lead, max)

	granted atomic.Int64
	closed  atomic.Bool
	// closedLast is LastTick as Close first read it (0: not yet): a
	// caller that lost to Close may still add to state before it takes
	// the add back, which must not raise LastTick past it.
	closedLast atomic.Int64

	layout    Layout
	machines  []uint64 // ascending
	k         uint64
	perTick   uint64
	seqBits   uint
	machBits  uint
	leadTicks int64        // MaxLead: how far ahead of the clock Reserve is asked
	aheadAt   atomic.Int64 // 1 + the clock's tick when it started ahead of the clock (startAhead), 0 if it did not
	ahead     int64
	floor     int64
	reserve   func(context.Context, int64) (int64, error)

	clock      clock.Clock
	sinceEpoch time.Duration // wall time since epoch at New
	mono0      time.Duration

	mu       sync.Mutex // guards timer, tickCh, lastErr, prefetch; not on the hot path
	timer    clock.Timer
	tickCh   chan struct{} // closed whenever the tick moves
	lastErr  error
	sem      chan struct{} // one Reserve at a time
	fetching atomic.Bool
	prefetch *reservation // the latest background Reserve
	rtt      atomic.Int64 // smoothed duration of a Reserve call, ns (reserve.go)
	capped   atomic.Int64 // 1 + monotonic ns of the last grant short of what was asked, 0 after a full one (reserve.go)
	ctx      context.Context
	cancel   context.CancelFunc

	waits, reserves, reserveErrs atomic.Uint64
}

// New validates the settings and starts a generator. It reads the wall
// clock once. Close it to stop its timer and get its last tick.
func New(s Settings) (*Generator, error) {
	l, err := s.Layout()
	if err != nil {
		return nil, err
	}
	ids := slices.Clone(s.MachineIDs)
	if len(ids) == 0 {
		ids = []int{s.MachineID}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id < l.MinMachineID() || id > l.MaxMachineID() {
			return nil, fmt.Errorf("%w: %d, valid range is %d..%d (%d is reserved for counter mode)",
				ErrInvalidMachineID, id, l.MinMachineID(), l.MaxMachineID(), l.CounterMachineID())
		}
		if i > 0 && id == ids[i-1] {
			return nil, fmt.Errorf("%w: machine ID %d given twice", ErrInvalidMachineID, id)
		}
	}
	if s.MaxLead < 0 {
		return nil, fmt.Errorf("%w: %v, must be >= 0 (0 means %v)", ErrInvalidLead, s.MaxLead, DefaultMaxLead)
	}
	if s.MaxLead == 0 {
		s.MaxLead = DefaultMaxLead
	}
	if s.ReserveAhead == 0 {
		s.ReserveAhead = DefaultReserveAhead
	}
	if s.ReserveAhead < l.TimeUnit {
		return nil, fmt.Errorf("%w: reserve ahead %v must be >= one tick (%v)", ErrReserve, s.ReserveAhead, l.TimeUnit)
	}
	if s.Floor < -1 || s.Floor >= l.MaxTick() {
		return nil, fmt.Errorf("%w: %d, valid range is -1..%d", ErrInvalidFloor, s.Floor, l.MaxTick()-1)
	}
	if s.Clock == nil {
		s.Clock = clock.System()
	}
	wall := s.Clock.Now()
	if wall.Before(l.StartTime) {
		return nil, fmt.Errorf("%w: epoch %s is after the clock's %s", ErrStartTimeAhead,
			l.StartTime.Format(time.RFC3339), wall.UTC().Format(time.RFC3339))
	}

	g := &Generator{
		layout:     l,
		k:          uint64(len(ids)),
		seqBits:    uint(l.BitsSequence),
		machBits:   uint(l.BitsMachineID),
		leadTicks:  int64(s.MaxLead / l.TimeUnit),
		ahead:      int64(s.ReserveAhead / l.TimeUnit),
		floor:      s.Floor,
		reserve:    s.Reserve,
		clock:      s.Clock,
		sinceEpoch: wall.Sub(l.StartTime),
		mono0:      s.Clock.Monotonic(),
		tickCh:     make(chan struct{}),
		sem:        make(chan struct{}, 1),
	}
	for _, id := range ids {
		g.machines = append(g.machines, uint64(id))
	}
	g.perTick = uint64(1) << g.seqBits * g.k
	g.ctx, g.cancel = context.WithCancel(context.Background())
	// The next value handed out is the first of tick Floor+1.
	g.state.Store(uint64(s.Floor+1)*g.perTick - 1)
	if g.reserve == nil {
		g.granted.Store(l.MaxTick())
	} else {
		g.granted.Store(max(s.Reserved, s.Floor))
	}
	g.now.Store(g.clockTick())
	g.startAhead(s.Floor+1, g.now.Load())
	g.updateLimit()
	g.mu.Lock()
	g.schedule()
	g.mu.Unlock()
	g.maybePrefetch()
	return g, nil
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// MachineIDs returns the machine IDs the generator issues under, ascending.
func (g *Generator) MachineIDs() []int {
	out := make([]int, len(g.machines))
	for i, m := range g.machines {
		out[i] = int(m)
	}
	return out
}

// NextID returns the next ID, waiting while the generator is MaxLead ahead
// of the clock.
func (g *Generator) NextID() (uint64, error) {
	if id, ok := g.tryNext(); ok {
		return id, nil
	}
	return g.nextSlow(context.Background())
}

// NextIDContext is NextID bounded by ctx: it returns an error wrapping
// ErrMaxLead and ctx.Err() when ctx ends while waiting for the clock.
func (g *Generator) NextIDContext(ctx context.Context) (uint64, error) {
	if id, ok := g.tryNext(); ok {
		return id, nil
	}
	return g.nextSlow(ctx)
}

func (g *Generator) nextSlow(ctx context.Context) (uint64, error) {
	for {
		if err := g.slow(ctx); err != nil {
			return 0, err
		}
		if id, ok := g.tryNext(); ok {
			return id, nil
		}
	}
}

// NextIDs fills dst with consecutive IDs and returns how many it filled,
// which is len(dst) unless err is set. In steady state it takes one atomic
// add for the whole batch.
func (g *Generator) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	if g.TryNextIDs(dst) {
		return len(dst), nil
	}
	for i := range dst {
		id, err := g.NextIDContext(ctx)
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}

// TryNextID returns the next ID if it can be issued at once: it never
// waits for the clock, a reservation or a lock. false means NextID would
// have to wait (or fail); nothing was issued then.
func (g *Generator) TryNextID() (uint64, bool) { return g.tryNext() }

// TryNextIDs fills dst with consecutive IDs if all of them can be issued at
// once, with one atomic add, and reports whether it did; it never waits.
// When it reports false nothing was issued (values it took may be burned:
// never issued, never reused).
func (g *Generator) TryNextIDs(dst []uint64) bool {
	n := uint64(len(dst))
	if n == 0 {
		return true
	}
	if n == 1 {
		id, ok := g.tryNext()
		dst[0] = id
		return ok
	}
	now := g.now.Load()
	st := g.state.Load()
	if g.tickOf(st+1) < now {
		// The clock has moved past the state: jump to the start of the
		// current tick, as tryNext does, when that tick is granted.
		// Losing the swap to another caller is fine; the state only rises.
		if now > g.limit.Load() {
			return false
		}
		g.state.CompareAndSwap(st, uint64(now)*g.perTick-1)
		if g.tickOf(g.state.Load()+1) < now {
			return false
		}
	}
	end := g.state.Add(n)
	if g.tickOf(end) > g.limit.Load() {
		g.undo(end, n)
		return false
	}
	for i := range dst {
		dst[i] = g.toID(end - n + 1 + uint64(i))
	}
	return true
}

// tryNext is the hot path: one atomic add, two atomic loads.
func (g *Generator) tryNext() (uint64, bool) {
	st := g.state.Add(1)
	tick := g.tickOf(st)
	if now := g.now.Load(); tick < now {
		// The clock has moved past the state: jump to the start of the
		// current tick. Winning the swap makes the jumped-to value ours;
		// losing it leaves st ours, only a little stale. When the current
		// tick is not granted yet, do not jump: the slow path reserves.
		if now > g.limit.Load() {
			g.undo(st, 1)
			return 0, false
		}
		if next := uint64(now) * g.perTick; g.state.CompareAndSwap(st, next) {
			st, tick = next, now
		}
	}
	// Loaded after the add: Close lowers limit before reading the state,
	// so either Close sees this value or this call sees the lowered limit.
	if tick > g.limit.Load() {
		g.undo(st, 1)
		return 0, false
	}
	return g.toID(st), true
}

// undo takes back an add of n that ended at st and could not be issued,
// when no other add came after it, so the values are not burned: without
// it, a caller waiting at MaxLead would burn sequence 0 of every tick it
// waits for. Only the slow path calls it. Values taken back were never
// handed out; if another add came first they stay burned (never issued,
// never reused), which is safe.
func (g *Generator) undo(st, n uint64) { g.state.CompareAndSwap(st, st-n) }

func (g *Generator) tickOf(st uint64) int64 {
	if g.k == 1 {
		return int64(st >> g.seqBits)
	}
	return int64(st / g.perTick)
}

func (g *Generator) toID(st uint64) uint64 {
	if g.k == 1 {
		return st<<g.machBits | g.machines[0]
	}
	tick, rem := st/g.perTick, st%g.perTick
	seq, idx := rem/g.k, rem%g.k
	return tick<<(g.seqBits+g.machBits) | seq<<g.machBits | g.machines[idx]
}

// slow runs when the hot path could not issue: it refreshes the clock,
// extends the grant or waits for the clock, then lets the caller retry.
func (g *Generator) slow(ctx context.Context) error {
	for {
		ch := g.tickChan()
		// Checked after taking ch: Close sets closed before it swaps the
		// channel, so a waiter either sees closed or holds a channel that
		// Close closes.
		if g.closed.Load() {
			return ErrClosed
		}
		now := g.refresh()
		need := max(g.tickOf(g.state.Load()+1), now)
		if need > g.layout.MaxTick() {
			return fmt.Errorf("%w: tick %d > %d (%s)", ErrOverTimeLimit, need, g.layout.MaxTick(),
				g.layout.TickTime(g.layout.MaxTick()).Format(time.RFC3339))
		}
		// A tick past max lead is waited for before it is reserved: the
		// store grants no further than its clock + the fleet's horizon,
		// which a floor set after a data loss (loss + skew + horizon) or
		// a takeover above another process's grant can be past for a
		// while; asking early would fail the caller instead of waiting.
		if need > g.granted.Load() && need <= now+g.leadTicks {
			if err := g.reserveWait(ctx, need, g.want(max(need, now), now)); err != nil {
				return err
			}
			continue
		}
		// Past the branch above a tick within max lead is granted, so this
		// covers it too (runLimit(now) >= now + leadTicks).
		g.startAhead(need, now)
		if need <= min(g.granted.Load(), g.runLimit(now)) {
			g.updateLimit()
			return nil
		}
		// Wait for the clock: to let need be issued, or, when the clock
		// lets it already and the grant does not, to bring it within max
		// lead, where it is reserved (the branch above).
		until := need - g.leadTicks
		if need > g.runLimit(now) {
			until = g.clockFor(need)
		}
		g.waits.Add(1)
		if err := g.waitTick(ctx, ch, until); err != nil {
			return fmt.Errorf("%w: next tick %d is %v ahead of the clock, max lead is %v: %w",
				ErrMaxLead, need, time.Duration(need-now)*g.layout.TimeUnit,
				time.Duration(g.leadTicks)*g.layout.TimeUnit, err)
		}
	}
}

// startAhead lets a generator that has issued nothing start at need, the
// tick after Floor, when Reserve granted it already, however far ahead of
// the clock now it is, instead of waiting for the clock to near it: a
// store grants no further ahead than is safe (Redis: its TIME + the
// fleet's horizon), so the grant, not the clock, bounds how far ahead the
// generator runs (docs/decisions.md). From then on it may run that far
// ahead plus MaxLead, less what it gives back (runLimit). Without Reserve
// nothing bounds the grant: it waits.
func (g *Generator) startAhead(need, now int64) {
	if g.reserve != nil && need == g.floor+1 && need <= g.granted.Load() && need > now {
		g.aheadAt.CompareAndSwap(0, now+1)
	}
}

// catchUp is how many ticks of the clock a generator that started ahead
// of it takes to give one tick of that start back (runLimit).
const catchUp = 2

// runLimit is the highest tick the clock lets the generator issue when it
// is at tick now: MaxLead ahead of it, and for a generator that started
// ahead of its clock (startAhead) as far as it started ahead, less one
// tick for every catchUp ticks of the clock since, until only MaxLead is
// left. Why it gives the start back: the store grants no further than its
// clock + the fleet's horizon, which counts MaxLead + ReserveAhead, so
// whatever a generator runs ahead of its clock past MaxLead is taken from
// the reservation it holds beyond what it issues, the reach that rides out
// a store that is away or does not acknowledge. A generator left as far
// ahead as it started would, under a load at its sequence limit, stay
// there (and hold a second or two of reach instead of ReserveAhead) for
// as long as the load lasts; giving the start back costs such a load half
// the ticks for twice the start (28 s after a start 14 s ahead), and a
// load below half the sequence limit nothing, the clock catching up faster
// than it gives back. runLimit never falls as now rises.
func (g *Generator) runLimit(now int64) int64 {
	lim := now + g.leadTicks
	if at := g.aheadAt.Load(); at != 0 {
		start := at - 1
		lim += max(0, g.floor+1-start-(now-start)/catchUp)
	}
	return lim
}

// clockFor is the first tick of the clock at which runLimit reaches need.
func (g *Generator) clockFor(need int64) int64 {
	lo, hi := g.now.Load(), max(g.now.Load(), need-g.leadTicks)
	for lo < hi { // runLimit only rises with the clock
		mid := lo + (hi-lo)/2
		if g.runLimit(mid) >= need {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// waitTick waits until the tick moves (ch is closed) or ctx ends. On a
// clock.Stepped nothing else moves the tick while the caller waits, so it
// lets the clock run to the start of tick instead.
func (g *Generator) waitTick(ctx context.Context, ch chan struct{}, tick int64) error {
	if s, ok := g.clock.(clock.Stepped); ok {
		d := g.sinceEpoch + g.clock.Monotonic() - g.mono0
		return s.Sleep(ctx, max(time.Duration(tick)*g.layout.TimeUnit-d, time.Nanosecond))
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clockTick reads the monotonic clock and turns it into a tick.
func (g *Generator) clockTick() int64 {
	d := g.sinceEpoch + g.clock.Monotonic() - g.mono0
	return int64(d / g.layout.TimeUnit)
}

// refresh advances g.now to the clock (never backwards) and returns it.
func (g *Generator) refresh() int64 {
	t := g.clockTick()
	for {
		cur := g.now.Load()
		if t <= cur {
			return cur
		}
		if g.now.CompareAndSwap(cur, t) {
			g.updateLimit()
			g.mu.Lock()
			close(g.tickCh)
			g.tickCh = make(chan struct{})
			g.mu.Unlock()
			return t
		}
	}
}

func (g *Generator) tickChan() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tickCh
}

// updateLimit raises limit to min(granted, runLimit(now), max tick). Both
// inputs only grow, so a value computed from older loads is merely
// conservative.
func (g *Generator) updateLimit() {
	l := min(g.granted.Load(), g.runLimit(g.now.Load()), g.layout.MaxTick())
	if bugs.IssuePastReservation {
		l = min(g.runLimit(g.now.Load()), g.layout.MaxTick())
	}
	for {
		cur := g.limit.Load()
		if g.closed.Load() || l <= cur {
			return
		}
		if g.limit.CompareAndSwap(cur, l) {
			if g.closed.Load() {
				g.limit.Store(-1)
			}
			return
		}
	}
}

// schedule arms the timer for the next tick boundary. g.mu is held.
func (g *Generator) schedule() {
	if g.closed.Load() {
		return
	}
	d := g.sinceEpoch + g.clock.Monotonic() - g.mono0
	wait := g.layout.TimeUnit - d%g.layout.TimeUnit
	g.timer = g.clock.AfterFunc(wait, g.onTick)
}

func (g *Generator) onTick() {
	g.refresh()
	g.maybePrefetch()
	g.mu.Lock()
	g.schedule()
	g.mu.Unlock()
}

// Close stops issuing IDs and the background work, and returns the highest
// tick any issued ID can have (Floor when none was issued): what a clean
// shutdown records so the next owner of these machine IDs starts after it.
func (g *Generator) Close() int64 {
	g.mu.Lock()
	if !g.closed.Swap(true) {
		g.limit.Store(-1)
		if g.timer != nil {
			g.timer.Stop()
		}
		g.cancel()
		close(g.tickCh) // wake waiters; they see closed
		g.tickCh = make(chan struct{})
	}
	prefetch := g.prefetch
	g.mu.Unlock()
	if prefetch != nil {
		prefetch.task.Stop()
	}
	last := g.LastTick()
	g.closedLast.CompareAndSwap(0, last)
	return g.LastTick()
}

// Closed reports whether Close was called.
func (g *Generator) Closed() bool { return g.closed.Load() }

// LastTick is an upper bound of the ticks of all IDs issued so far (Floor
// when none was). After Close it never rises: it may still fall when a
// caller that lost to Close takes back an add it could not issue (undo),
// so every value read after Close bounds every ID issued.
func (g *Generator) LastTick() int64 {
	last := max(min(g.tickOf(g.state.Load()), g.granted.Load()), g.floor)
	if c := g.closedLast.Load(); c != 0 {
		return min(last, c)
	}
	return last
}

// Stats is a snapshot of a generator's state.
type Stats struct {
	Now           int64 // the clock's tick
	Last          int64 // highest tick handed out (or burned)
	Granted       int64 // highest tick granted by Reserve
	Floor         int64
	Lead          time.Duration // how far ahead of the clock the generator runs
	Headroom      time.Duration // granted ticks left ahead of max(now, last)
	Waits         uint64        // times NextID waited for the clock
	Reserves      uint64        // Reserve calls
	ReserveErrors uint64        // failed Reserve calls
	LastError     error         // the last Reserve failure, nil after a success
	Closed        bool
	MachineIDs    []int
}

// Stats returns a snapshot; it is not on the hot path.
func (g *Generator) Stats() Stats {
	now := g.refresh()
	last := g.tickOf(g.state.Load())
	granted := g.granted.Load()
	g.mu.Lock()
	lastErr := g.lastErr
	g.mu.Unlock()
	unit := g.layout.TimeUnit
	return Stats{
		Now:           now,
		Last:          last,
		Granted:       granted,
		Floor:         g.floor,
		Lead:          time.Duration(max(last-now, 0)) * unit,
		Headroom:      time.Duration(max(granted-max(now, last), 0)) * unit,
		Waits:         g.waits.Load(),
		Reserves:      g.reserves.Load(),
		ReserveErrors: g.reserveErrs.Load(),
		LastError:     lastErr,
		Closed:        g.closed.Load(),
		MachineIDs:    g.MachineIDs(),
	}
}
