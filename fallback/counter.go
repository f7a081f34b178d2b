package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/internal/segment"
)

// Errors of the counter.
var (
	// ErrUnavailable is wrapped when no ID can be handed out: the buffer
	// is spent and Redis did not answer (or the caller's context ended
	// first). No ID is ever guessed.
	ErrUnavailable = errors.New("counter mode unavailable")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("counter is closed")
	// ErrLayoutMismatch is wrapped when counter.lua refuses the counter's
	// layout (width, region, ...) because the fleet stored another one:
	// a configuration error that waiting does not cure.
	ErrLayoutMismatch = errors.New("layout differs from the fleet's")
	// ErrNoRegistry: the namespace has no registry and this counter never
	// ran under it (coord.ErrNoRegistry).
	ErrNoRegistry = contract.ErrNoRegistry
)

var counterScript = redis.NewScript(contract.Counter)

// counterNeedAt is where counter.lua's segment reply carries the count of
// replicas that must acknowledge it (scripts/lua/replicas.lua).
const counterNeedAt = 6

// ErrNotReplicated is wrapped by the error of a segment the replicas did
// not acknowledge within Options.ReplicaWait: it is not used (its values
// are a gap in the counter), and the fetch is retried.
var ErrNotReplicated = replwait.ErrNotReplicated

// span maps a segment's indices to counter values: index i is first+i.
type span struct {
	first     uint64        // counter value of index 0
	installed time.Time     // when it became the current segment
	rtt       time.Duration // the round trip of the counter.lua run that granted it
}

// newSegment is a segment of [first, first+n) whose next one is fetched
// when half of it is left. Segments last about 2 x Options.Hold at the
// observed rate (nextSizeLocked), so a node holds at least Hold of IDs and
// a Redis that is slow or paused for that long does not stop it. A
// buffered value's tick is its segment's fetch time, never later than
// Redis TIME + MaxLead then, so a loss of Redis (which restarts the
// counter past that) leaves the buffer unique however long it is held; at
// rates where a segment would run past the lead, MaxSegment or the lead
// caps it first.
func newSegment(first uint64, n int64) *segment.Segment[span] {
	s := segment.New[span](n, n-max(1, n/2)) // half left
	s.Meta.first = first
	return s
}

// Counter issues counter-mode IDs: values of the Redis counter
// {ns}:counter, fetched in segments, encoded as (tick, sequence) under the
// layout's counter machine ID. It is safe for concurrent use.
type Counter struct {
	// buf holds the segment NextID takes from and the one fetched ahead;
	// mu guards it.
	buf segment.Buffer[span]

	rdb       redis.UniversalClient
	wait      replwait.Waiter // the WAIT after each segment
	opts      Options
	keys      contract.Keys
	args      contract.CounterArgs // what every fetch sends counter.lua but its size, floor and generation
	shift     uint                 // machine bits
	machine   uint64               // the counter machine ID
	seqBits   uint
	leadTicks int64
	maxValue  uint64 // value of (MaxTick, MaxSequence)

	mu      sync.Mutex
	floor   uint64        // lowest value that may be handed out (SetFloor)
	high    uint64        // one past the last value of the latest segment
	size    int64         // size asked for by the latest fetch
	latency time.Duration // moving average of counter.lua round trips
	lastErr error
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc

	fetched, fetchErrs, waits atomic.Uint64
	// known is set once counter.lua has handed this counter a segment
	// (or Options.Known): its layout was then the fleet's, so when Redis
	// has lost the registry since, this counter restores it, as a lease
	// owner's renewal does; until then it sends no generation, and a
	// missing registry is refused (guard.lua).
	known atomic.Bool
}

// New validates opts and returns a counter on rdb. It does not talk to
// Redis until the first NextID.
func New(rdb redis.UniversalClient, opts Options) (*Counter, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := o.Layout
	c := &Counter{
		rdb:       rdb,
		opts:      o,
		keys:      contract.NewKeys(o.Namespace),
		shift:     uint(l.BitsMachineID),
		machine:   uint64(l.CounterMachineID()),
		seqBits:   uint(l.BitsSequence),
		leadTicks: int64(o.MaxLead / l.TimeUnit),
		maxValue:  uint64(l.MaxTick())<<l.BitsSequence | uint64(l.MaxSequence()),
		size:      int64(o.MinSegment),
	}
	c.wait.Meta = c.keys.Meta
	c.wait.Floor = int64(c.opts.MinReplicas)
	c.wait.Sentinels, c.wait.Clock, c.wait.Marks = c.opts.Sentinels, c.opts.Clock, c.opts.Marks
	c.args = contract.CounterArgs{
		Keys: c.keys, EpochUs: l.StartTime.UnixMicro(), TickUs: float64(l.TimeUnit) / float64(time.Microsecond),
		SeqBits: l.BitsSequence, Lead: c.leadTicks, Layout: l.String(), EventsMaxLen: o.EventsMaxLen,
		CounterID: l.CounterMachineID(), Host: o.Host, PID: o.PID, Identity: o.RedisIdentity,
	}
	c.known.Store(o.Known)
	c.buf.Mu, c.buf.Clock, c.buf.ErrClosed = &c.mu, o.Clock, ErrClosed
	c.buf.Closed = func() bool { return c.closed }
	c.buf.Begin, c.buf.Landed, c.buf.Install = c.beginLocked, c.landedLocked, c.installLocked
	c.buf.Waiting = func() { c.waits.Add(1) }
	c.buf.SetCurrent(newSegment(0, 0)) // empty: the first call fetches
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Options returns the options with defaults filled in.
func (c *Counter) Options() Options { return c.opts }

// Key returns the Redis key of the counter, {ns}:counter.
func (c *Counter) Key() string { return c.keys.Counter }

func (c *Counter) id(v uint64) uint64 { return v<<c.shift | c.machine }

// NextID returns the next ID. In steady state it takes one atomic add and
// never waits on Redis: the next segment is fetched in the background when
// half of the current one is left. When the buffer is spent it waits for a
// segment, bounded by ctx; if Redis fails it returns an error wrapping
// ErrUnavailable.
func (c *Counter) NextID(ctx context.Context) (uint64, error) {
	for {
		s := c.buf.Current()
		if i, got := s.Take(1); got > 0 {
			if s.Triggers(i, got) {
				c.buf.Prefetch(s)
			}
			return c.id(s.Meta.first + uint64(i)), nil
		}
		if err := c.await(ctx, s); err != nil {
			return 0, err
		}
	}
}

// TryNextIDs fills dst with strictly increasing IDs if the current segment
// holds all of them, and reports whether it did. It never waits on Redis
// (at most on a lock held for a moment, to start a prefetch); when it
// reports false nothing was taken.
func (c *Counter) TryNextIDs(dst []uint64) bool {
	s := c.buf.Current()
	want := int64(len(dst))
	i, ok := s.TryTake(want)
	if !ok {
		return false
	}
	if s.Triggers(i, want) {
		c.buf.Prefetch(s)
	}
	v := s.Meta.first + uint64(i)
	for k := range dst {
		dst[k] = c.id(v + uint64(k))
	}
	return true
}

// NextIDs fills dst with strictly increasing IDs and returns how many it
// wrote: len(dst), or fewer with an error (as NextID's).
func (c *Counter) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	filled := 0
	for filled < len(dst) {
		s := c.buf.Current()
		if i, got := s.Take(int64(len(dst) - filled)); got > 0 {
			if s.Triggers(i, got) {
				c.buf.Prefetch(s)
			}
			v := s.Meta.first + uint64(i)
			for k := range dst[filled : filled+int(got)] {
				dst[filled+k] = c.id(v + uint64(k))
			}
			filled += int(got)
			continue
		}
		if err := c.await(ctx, s); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// Warm starts fetching a segment in the background when nothing is
// buffered and no fetch is on its way, so that a counter that has not
// been asked for IDs yet (or whose last fetch failed) gets ready without
// waiting for a caller. It never blocks.
func (c *Counter) Warm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && c.buf.IdleLocked() && c.buf.Current().Left() == 0 {
		c.buf.StartLocked()
	}
}

// CheckLayout reads the fleet's stored layout and returns an error
// wrapping ErrLayoutMismatch, naming both, when it differs from the
// counter's: counter.lua would refuse every fetch (it makes the same
// comparison first). None stored is ErrNoRegistry unless the counter
// knows the registry (it restores it then). A node started in counter
// mode calls it so that a wrong layout (width, region) or a namespace
// flaked init never made fails its start, not its first ID; it is one
// GET, so the start does not wait for a segment.
func (c *Counter) CheckLayout(ctx context.Context) error {
	want := c.opts.Layout.String()
	fleet, err := c.rdb.Get(ctx, c.keys.Layout).Result()
	switch {
	case errors.Is(err, redis.Nil):
		if c.known.Load() {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrNoRegistry, contract.NoRegistryText(c.keys.Layout))
	case err != nil:
		return fmt.Errorf("%w: reading the fleet layout %s: %w", ErrUnavailable, c.keys.Layout, err)
	case fleet != want:
		return fmt.Errorf("%w: layout %s differs from the fleet layout %s (%s)", ErrLayoutMismatch, want, fleet, c.keys.Layout)
	}
	return nil
}

// await is the slow path, once s is spent: it makes the prefetched segment
// current, or waits for a fetch. It returns nil when the caller should try
// again.
func (c *Counter) await(ctx context.Context, s *segment.Segment[span]) error {
	err := c.buf.Await(ctx, s)
	var waited *segment.WaitError
	switch {
	case err == nil || err == ErrClosed:
		return err
	case errors.As(err, &waited):
		// The caller's wait ended with a fetch in flight: the last fetch's
		// failure, if any, says what the counter waits for (no registry,
		// Redis away), not only that time ran out.
		if waited.Last != nil {
			return fmt.Errorf("%w: waiting for a segment of %s from Redis: %w (the last fetch: %w)", ErrUnavailable, c.keys.Counter, waited.Err, waited.Last)
		}
		return fmt.Errorf("%w: waiting for a segment of %s from Redis: %w", ErrUnavailable, c.keys.Counter, waited.Err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// installLocked is called as seg becomes the current segment; the old one
// is spent. The prefetch starts when half of seg is left, or earlier when,
// at the rate the old one was used, less would not last the hold (or 4
// round trips): a segment Redis cut short at its TIME + the lead (the
// counter runs that far ahead when segments are large or the rate high)
// would otherwise hold less than the hold when its prefetch fails.
func (c *Counter) installLocked(seg *segment.Segment[span]) {
	now := c.opts.Clock.Now()
	if prev := c.buf.Current(); prev.N() > 0 {
		if el := now.Sub(prev.Meta.installed); el > 0 {
			need := int64(float64(prev.N()) * float64(max(c.opts.Hold, 4*c.latency)) / float64(el))
			if need > seg.N()/2 {
				seg.SetFetchAt(max(seg.N()-min(need, seg.N()), seg.Taken()))
			}
		}
	}
	seg.Meta.installed = now
}

// beginLocked sizes the fetch that starts and returns it.
func (c *Counter) beginLocked() segment.Fetch[span] {
	c.size = c.nextSizeLocked()
	size := c.size
	return func() (*segment.Segment[span], error) { return c.fetchSegment(size) }
}

// nextSizeLocked sizes the next segment so that it lasts about
// 2 x Hold at the rate the current one was used at; twice the last
// size when the buffer ran dry before a prefetch could refill it.
func (c *Counter) nextSizeLocked() int64 {
	lo, hi := int64(c.opts.MinSegment), int64(c.opts.MaxSegment)
	cur := c.buf.Current()
	size := c.size
	if cur.N() > 0 {
		used := min(cur.Taken(), cur.N())
		if cur.Left() == 0 {
			size *= 2
		} else if el := c.opts.Clock.Now().Sub(cur.Meta.installed); el <= 0 {
			size = hi
		} else if used > 0 {
			size = int64(float64(used) * float64(2*c.opts.Hold) / float64(el))
		}
	}
	return min(max(size, lo), hi)
}

// landedLocked records a fetch's outcome; the buffer hands its segment
// over unless it returns an error.
func (c *Counter) landedLocked(seg *segment.Segment[span], err error) error {
	switch {
	case c.closed:
		return ErrClosed
	case err != nil:
		c.lastErr = err
		c.fetchErrs.Add(1)
		// Try again when half of what is left is used.
		if cur := c.buf.Current(); cur.Left() > 0 {
			i := cur.Taken()
			cur.SetFetchAt(i + (cur.N()-i)/2)
		}
		return err
	}
	c.lastErr = nil
	if rtt := seg.Meta.rtt; c.latency == 0 {
		c.latency = rtt
	} else {
		c.latency = (3*c.latency + rtt) / 4
	}
	c.fetched.Add(1)
	c.high = max(c.high, seg.Meta.first+uint64(seg.N()))
	if c.floor > seg.Meta.first {
		seg.SkipTo(min(int64(c.floor-seg.Meta.first), seg.N()))
	}
	return nil
}

// fetchSegment runs counter.lua until it hands out a segment: while Redis
// says the counter is at its lead, it waits for the ticks to pass. The
// segment records the round trip of the last run.
func (c *Counter) fetchSegment(size int64) (*segment.Segment[span], error) {
	unit := c.opts.Layout.TimeUnit
	// After a loss the counter restarts loss + the fleet's lead + the Redis
	// clocks' skew ahead (counter.lua): wait for that when the fleet's lead
	// is up to a second longer than ours.
	maxWait := c.leadTicks + int64((time.Second+contract.RedisSkew)/unit) + 2
	for {
		c.mu.Lock()
		minValue := max(c.floor, c.high)
		c.mu.Unlock()
		start := c.opts.Clock.Monotonic()
		a := c.args
		a.Size = size
		if c.known.Load() {
			a.Generation = segment.NewGeneration(c.opts.Rand)
		}
		a.Mark = c.wait.Mark()
		a.MinTick, a.MinSeq = int64(minValue>>c.seqBits), int64(minValue&(1<<c.seqBits-1))
		keys, argv := a.KeysArgv()
		res, _, err := c.wait.Run(c.ctx, c.rdb, counterScript, keys, argv, counterNeedAt, c.opts.ReplicaWait)
		rtt := c.opts.Clock.Monotonic() - start
		if err != nil {
			if c.ctx.Err() != nil {
				return nil, ErrClosed
			}
			return nil, fmt.Errorf("counter.lua on %s: %w", c.keys.Counter, err)
		}
		if len(res) == 2 && res[0] == "LAYOUT" {
			return nil, fmt.Errorf("counter.lua on %s: %w: layout %s differs from the fleet layout %v",
				c.keys.Counter, ErrLayoutMismatch, a.Layout, res[1])
		}
		if len(res) >= 6 && res[0] == "OK" {
			first, err1 := c.composeValue(res[1], res[2])
			last, err2 := c.composeValue(res[3], res[4])
			if err := errors.Join(err1, err2); err != nil || last < first {
				return nil, fmt.Errorf("counter.lua on %s: bad reply %v: %v", c.keys.Counter, res, err)
			}
			if last > c.maxValue {
				return nil, fmt.Errorf("counter.lua on %s: value %d is past the last tick of the layout %v (tick %d > %d)",
					c.keys.Counter, last, c.opts.Layout, last>>c.seqBits, c.opts.Layout.MaxTick())
			}
			c.known.Store(true)
			seg := newSegment(first, int64(last-first+1))
			seg.Meta.rtt = rtt
			return seg, nil
		}
		if len(res) != 3 || res[0] != "AHEAD" {
			return nil, fmt.Errorf("counter.lua on %s: unexpected reply %v", c.keys.Counter, res)
		}
		now, _ := res[1].(int64)
		want, _ := res[2].(int64)
		ahead := want - now - c.leadTicks // ticks until the next value is within the lead
		if ahead > maxWait {
			return nil, fmt.Errorf("counter %s: the next value is at tick %d, %d ticks ahead of Redis TIME (tick %d); max lead is %v (%d ticks): is the floor from a clock far ahead?",
				c.keys.Counter, want, want-now, now, c.opts.MaxLead, c.leadTicks)
		}
		// Wait for the tick to pass on Redis's clock, re-reading it then.
		if !c.waitTicks(ahead) {
			return nil, ErrClosed
		}
	}
}

// waitTicks waits n ticks (at least one), or until the counter closes:
// then it reports false.
func (c *Counter) waitTicks(n int64) bool {
	return clock.Sleep(c.ctx, c.opts.Clock, time.Duration(max(n, 1))*c.opts.Layout.TimeUnit) == nil
}

// composeValue is the counter value of counter.lua's (tick, seq) pair.
func (c *Counter) composeValue(tick, seq any) (uint64, error) {
	t, ok1 := tick.(int64)
	s, ok2 := seq.(int64)
	if !ok1 || !ok2 || t < 0 || s < 0 || s >= 1<<c.seqBits {
		return 0, fmt.Errorf("(tick %v, seq %v) is not a counter value of %v", tick, seq, c.opts.Layout)
	}
	if t > c.opts.Layout.MaxTick() {
		return 0, fmt.Errorf("tick %d is past the last tick of the layout %v (%d)", t, c.opts.Layout, c.opts.Layout.MaxTick())
	}
	return uint64(t)<<c.seqBits | uint64(s), nil
}

// SetFloor makes sure no ID at or below minID is handed out from now on,
// discarding buffered values: a node switching from flake mode sets its
// last flake ID, so its IDs stay strictly increasing. Bit 63 is ignored.
func (c *Counter) SetFloor(minID uint64) {
	minID &= 1<<63 - 1
	lo := minID >> c.shift // lowest value whose ID is above minID
	if minID&c.machine == c.machine {
		lo++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if lo <= c.floor {
		return
	}
	c.floor = lo
	if next := c.buf.NextLocked(); next != nil && lo > next.Meta.first {
		next.SkipTo(int64(min(lo-next.Meta.first, uint64(next.N()))))
		if next.Left() == 0 {
			c.buf.DropNextLocked()
		}
	}
	if cur := c.buf.Current(); lo > cur.Meta.first && cur.N() > 0 {
		cur.SkipTo(int64(min(lo-cur.Meta.first, uint64(cur.N()))))
		if !c.closed && c.buf.IdleLocked() && cur.Taken() > cur.FetchAt() {
			c.buf.StartLocked()
		}
	}
}

// LastTick is an upper bound of the ticks of every ID this counter has
// handed out, or may still hand out from its buffer: the tick of the last
// value of the latest segment Redis granted (-1 when none was). After
// Close it is final; a node switching back to flake mode starts its
// generator after it, so its IDs keep increasing.
func (c *Counter) LastTick() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.high == 0 {
		return -1
	}
	return int64((c.high - 1) >> c.seqBits)
}

// Stats are counters of a Counter.
type Stats struct {
	SegmentsFetched uint64 // segments handed out by Redis
	FetchErrors     uint64 // fetches that failed
	Waits           uint64 // NextID calls that waited for Redis (buffer spent)
	SegmentSize     int    // size asked for by the latest fetch
	Buffered        int64  // values left in the current and the prefetched segment
	LastError       error  // of the latest fetch; nil after a success
	// Replicas is the latest segment's outcome as far as the replicas go:
	// what it waited for, what acknowledged, or that the Sentinels
	// vouched for it (nil before the first, or when it never reached
	// Redis).
	Replicas *replwait.Status
}

// Stats returns the counter's statistics.
func (c *Counter) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		SegmentsFetched: c.fetched.Load(),
		FetchErrors:     c.fetchErrs.Load(),
		Waits:           c.waits.Load(),
		SegmentSize:     int(c.size),
		LastError:       c.lastErr,
		Replicas:        c.wait.Last(),
	}
	if !c.closed {
		st.Buffered = c.buf.Current().Left()
		if next := c.buf.NextLocked(); next != nil {
			st.Buffered += next.Left()
		}
	}
	return st
}

// Close stops the counter: it cancels a fetch in flight and waits for it.
// Buffered values are dropped; NextID then returns ErrClosed.
func (c *Counter) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.cancel()
		cur := c.buf.Current()
		cur.SkipTo(cur.N())
		c.buf.DropNextLocked()
	}
	run := c.buf.RunLocked()
	c.mu.Unlock()
	if run != nil {
		run.Stop()
	}
	return nil
}
