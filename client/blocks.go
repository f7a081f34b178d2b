package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/segment"
)

// block is what a block (NEXTBLOCK) is in the segment buffer: the
// segment's index i is the block's i-th ID. Its IDs are taken with one
// atomic add on the segment, so NextID takes no lock while a block lasts.
type block struct {
	first    uint64 // ID of index 0
	stride   uint64
	base     uint64   // with several machine IDs: first's step, machine bits 0
	machines []uint64 // nil under one machine ID
	j0, k    uint64   // first's index in machines; len(machines)
	askedAt  time.Time
	full     bool // it had all the IDs asked for
	deadline time.Time
	daemon   *daemon
	dropped  bool // expired before it was used up; under mu
}

// cblock is one block being handed out.
type cblock = segment.Segment[block]

// id is the block's i-th ID (flake.Block.ID, with the machine index
// looked up once).
func (b *block) id(i int64) uint64 {
	if b.k == 0 {
		return b.first + uint64(i)*b.stride
	}
	j := b.j0 + uint64(i)
	return b.base + j/b.k*b.stride + b.machines[j%b.k]
}

var (
	// errNoBlocks: the daemon predates NEXTBLOCK; NextID uses NEXTIDS.
	errNoBlocks = errors.New("daemon has no NEXTBLOCK")
	// errStopped is the buffer's closed error: the client is closed, or
	// NextID uses NEXTIDS (fallback set).
	errStopped = errors.New("blocks stopped")
)

// blocker serves NextID from blocks fetched in the background with
// NEXTBLOCK, on the segment buffer counter mode and named sequences use
// (internal/segment: the current block and one fetched ahead, one fetch
// at a time, its error handed to the callers that wait): the next block
// is fetched when half of the current one is used, so NextID rarely waits
// and never takes a lock while a block lasts. What is the client's own
// lives here, in the buffer's hooks: blocks from one daemon increase (its
// IDs do); a block from another daemon, after a failover, is cut so that
// it starts above the last block, so the IDs NextID returns increase in
// the order it returns them (accept). IDs expire MaxAge after the earlier
// of their block's request and its first ID's tick: a timer spends the
// block then, and a block fetched ahead that has expired is spent as it
// is installed (expireLocked, installLocked).
//
// The size of the blocks follows demand (blockSize): a refill asked for
// at half a block arrives before the block is used up only while half a
// block lasts longer than the refill's round trip, and a NEXTBLOCK costs
// the same whatever its count, so the count grows while blocks are used
// up before the next one arrives, or go fast, and shrinks back toward
// Prefetch when they last long.
//
// A NextID that finds the blocks spent waits for the refill as long as
// its context allows: each refill is bounded by Options.Wait, and one
// that fails ends the wait of every caller with its error (what the
// daemons answered, or why their blocks could not be used): Final says
// so for every error, as a caller that joined a refill has no cheaper
// way to the daemons than that refill's.
//
// When the daemon answers NEXTBLOCK with "unknown command", the client
// switches to NEXTIDS batches (prefetcher) for good.
type blocker struct {
	c       *Client
	minSize int64 // Prefetch: the first blocks' size, and the smallest
	maxAge  time.Duration

	// buf holds the block NextID takes from and the one fetched ahead;
	// mu guards it and the fields below it.
	buf segment.Buffer[block]

	// size is the count the last NEXTBLOCK asked for (Stats.BlockSize).
	size     atomic.Int64
	fallback atomic.Pointer[prefetcher] // set when the daemons predate NEXTBLOCK

	mu sync.Mutex
	// Of the last block received, for the next refill's size. askedAt is
	// zero once used, so that retries after a failed refill do not count
	// as blocks that lasted no time.
	askedAt  time.Time
	full     bool   // it had all the IDs asked for
	last     uint64 // last ID of the latest block accepted
	hasLast  bool
	unusable int // blocks in a row dropped on arrival (unusableError)
	// outran: the last block received arrived after the one before it
	// was used up (callers waited for it); cleared when a block expires,
	// as demand has fallen since.
	outran bool
	expiry *time.Timer

	prefetched, expired, waits atomic.Uint64
}

func newBlocker(c *Client) *blocker {
	p := &blocker{
		c:       c,
		minSize: int64(c.opts.Prefetch),
		maxAge:  c.opts.MaxAge,
	}
	p.size.Store(p.minSize)
	b := &p.buf
	b.Mu, b.Clock, b.ErrClosed = &p.mu, clock.System(), errStopped
	b.Closed = func() bool { return c.closed.Load() || p.fallback.Load() != nil }
	b.Begin, b.Landed, b.Install = p.beginLocked, p.landedLocked, p.installLocked
	b.Final = func(error) bool { return true }
	b.Waiting = func() { p.waits.Add(1) }
	b.SetCurrent(segment.New[block](0, -1)) // spent: the first NextID asks for a block
	p.expiry = time.AfterFunc(time.Hour, func() {
		p.mu.Lock()
		p.expireLocked()
		p.mu.Unlock()
	})
	p.expiry.Stop()
	return p
}

// nextID hands out the next ID of the current block: one atomic add in
// the common case.
func (p *blocker) nextID(ctx context.Context) (uint64, error) {
	b := p.buf.Current()
	if i, ok, triggers := b.TakeOne(); ok {
		if triggers {
			p.buf.Prefetch(b)
		}
		return b.Meta.id(i), nil
	}
	// The slow path. It waits as long as ctx allows, not Options.Wait:
	// while refills succeed the caller gets an ID, however many blocks
	// other callers spend first; a refill that fails (bounded by Wait)
	// ends the wait with its error.
	for {
		b := p.buf.Current()
		if i, ok, triggers := b.TakeOne(); ok {
			if triggers {
				p.buf.Prefetch(b)
			}
			return b.Meta.id(i), nil
		}
		if pf := p.fallback.Load(); pf != nil {
			return pf.next(ctx) // bounds its own wait by Options.Wait
		}
		if err := p.await(ctx, b); err != nil {
			return 0, err
		}
	}
}

// await is the slow path, once b is spent: it makes the fetched block
// current, or waits for a refill. nil means try again (the fallback may
// be set); an error is the refill's that this caller waited for (the
// daemons' answers), or ctx's.
func (p *blocker) await(ctx context.Context, b *cblock) error {
	err := p.buf.Await(ctx, b)
	var waited *segment.WaitError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errStopped):
		if p.c.closed.Load() {
			return fmt.Errorf("flaked client: NEXTID: %w", ErrClosed)
		}
		return nil // NEXTIDS from now on
	case errors.As(err, &waited):
		if waited.Last != nil {
			return fmt.Errorf("flaked client: NEXTID: waiting for a prefetch block: %w (the last refill: %w)", waited.Err, waited.Last)
		}
		return fmt.Errorf("flaked client: NEXTID: waiting for a prefetch block: %w", waited.Err)
	}
	return err
}

// installLocked is called as nb becomes the current block; the old one is
// spent (or expired). A block fetched ahead that expired while it waited
// is spent now, so that the caller asks for another; else the expiry
// timer is armed for nb.
func (p *blocker) installLocked(nb *cblock) {
	now := p.c.opts.Now()
	if now.After(nb.Meta.deadline) {
		nb.Meta.dropped = true
		p.outran = false
		p.expired.Add(uint64(nb.SkipTo(nb.N())))
		return
	}
	p.expiry.Reset(nb.Meta.deadline.Sub(now))
}

// expireLocked spends the current block and drops the fetched one when
// MaxAge has passed for them.
func (p *blocker) expireLocked() {
	now := p.c.opts.Now()
	if b := p.buf.Current(); b.N() > 0 && now.After(b.Meta.deadline) {
		b.Meta.dropped = true
		p.outran = false
		p.expired.Add(uint64(b.SkipTo(b.N())))
	}
	if next := p.buf.NextLocked(); next != nil && now.After(next.Meta.deadline) {
		p.expired.Add(uint64(next.Left()))
		p.buf.DropNextLocked()
	}
}

// beginLocked sizes the refill that starts, from how the last block
// received went, and returns it.
func (p *blocker) beginLocked() segment.Fetch[block] {
	p.expireLocked()
	size := p.size.Load()
	if !p.askedAt.IsZero() {
		size = blockSize(size, p.minSize, p.full, p.outran, p.c.opts.Now().Sub(p.askedAt), p.maxAge)
		p.size.Store(size)
		p.askedAt = time.Time{}
	}
	return func() (*cblock, error) { return p.refill(size) }
}

// landedLocked records a refill's outcome; the buffer hands its block
// over (current when the current one is spent, else fetched ahead)
// unless it returns an error.
func (p *blocker) landedLocked(nb *cblock, err error) error {
	switch {
	case p.c.closed.Load():
		return errStopped
	case errors.Is(err, errNoBlocks):
		p.fallback.Store(newPrefetcher(p.c))
		p.expiry.Stop()
		return errStopped
	case err != nil:
		return err
	}
	cur := p.buf.Current()
	p.askedAt, p.full = nb.Meta.askedAt, nb.Meta.full
	p.outran = cur.N() > 0 && cur.Spent() && !cur.Meta.dropped
	return nil
}

// refill asks for one block of up to size IDs until one can be used:
// a block dropped on arrival (unusableError) is asked for again after its
// wait while NextID callers keep waiting, as the next block may do. Past
// maxUnusable blocks in a row they get the error, and the buffer asks
// again only when one waits.
func (p *blocker) refill(size int64) (*cblock, error) {
	for {
		nb, err := p.fetch(p.c.ctx, size)
		var unusable *unusableError
		if !errors.As(err, &unusable) || unusable.rounds > maxUnusable {
			return nb, err
		}
		if err := clock.Sleep(p.c.ctx, p.buf.Clock, unusable.wait); err != nil {
			return nil, err
		}
	}
}

// fetch asks for one block of up to size IDs, from the daemon of the last
// block first (its blocks increase), then from the others in do's order.
func (p *blocker) fetch(ctx context.Context, size int64) (*cblock, error) {
	layout, err := p.c.Layout(ctx)
	if err != nil {
		return nil, err
	}
	var fb flake.Block
	var from *daemon
	unsupported := false
	fn := func(ctx context.Context, rdb *redis.Client) error {
		b, err := nextBlock(ctx, rdb, size)
		if err != nil && isUnknownCommand(err) {
			unsupported = true
			return nil
		}
		if err == nil {
			if err = b.Check(layout); err != nil {
				err = replyError("NEXTBLOCK %d: %v", size, err)
			} else if b.Count > size {
				err = replyError("NEXTBLOCK %d gave a block of %d IDs", size, b.Count)
			}
		}
		for _, d := range p.c.daemons {
			if d.rdb == rdb {
				from = d
			}
		}
		fb = b
		return err
	}
	at := p.c.opts.Now()
	if prev := p.buf.Current().Meta.daemon; prev == nil || p.c.try(ctx, prev, fn) != nil {
		err = p.c.do(ctx, "NEXTBLOCK "+strconv.FormatInt(size, 10)+" (prefetch)", fn)
	}
	if err != nil {
		return nil, err
	}
	if unsupported {
		return nil, errNoBlocks
	}
	nb, err := p.accept(fb, from, at, layout)
	if err == nil {
		nb.Meta.full = nb.N() == size
	}
	return nb, err
}

// accept turns a block received at request time at into a cblock: its
// deadline, and its start above the last block's.
func (p *blocker) accept(fb flake.Block, from *daemon, at time.Time, l flake.Layout) (*cblock, error) {
	tickAt := l.TickTime(l.Decompose(fb.First).Tick)
	m := block{
		first: fb.First, stride: fb.Stride, machines: fb.MachineIDs,
		askedAt: at, deadline: minTime(at, tickAt).Add(p.maxAge), daemon: from,
	}
	if k := len(fb.MachineIDs); k > 0 {
		mid := fb.First & (fb.Stride - 1)
		m.base, m.k = fb.First-mid, uint64(k)
		m.j0 = uint64(sort.Search(k, func(i int) bool { return fb.MachineIDs[i] >= mid }))
	}
	n := fb.Count
	p.prefetched.Add(uint64(n))
	p.mu.Lock()
	defer p.mu.Unlock()
	// Strictly above every ID handed out before: a block from another
	// daemon may start lower; its IDs up to the last block's are dropped.
	var skip int64
	if p.hasLast && m.first <= p.last {
		skip = int64(sort.Search(int(n), func(i int) bool { return m.id(int64(i)) > p.last }))
		p.expired.Add(uint64(skip))
		if skip == n {
			p.unusable++
			wait := time.Until(l.TickTime(l.Decompose(p.last).Tick + 1))
			return nil, &unusableError{rounds: p.unusable, wait: min(max(wait, time.Millisecond), time.Second), err: replyError(
				"NEXTBLOCK from %s gave IDs up to %d, at or below the last block's %d (a daemon behind the one before it, by %v): dropped, %d blocks in a row",
				from.addr, m.id(n-1), p.last, wait, p.unusable)}
		}
	}
	if now := p.c.opts.Now(); now.After(m.deadline) {
		p.expired.Add(uint64(n - skip))
		p.unusable++
		return nil, &unusableError{rounds: p.unusable, err: fmt.Errorf(
			"flaked client: a block arrived %v after it was asked for, its first ID's tick %v old, more than MaxAge %v, so its IDs were dropped (%d blocks in a row): raise MaxAge",
			now.Sub(at), now.Sub(tickAt), p.maxAge, p.unusable)}
	}
	p.unusable = 0
	p.last, p.hasLast = m.id(n-1), true
	nb := segment.New[block](n, skip+(n-skip)/2) // the refill at half of what is left
	nb.Meta = m
	nb.SkipTo(skip)
	return nb, nil
}

// blockSize is the count to ask the next block for, from the last one's
// (size; full: it came with all of them), whether the block before it was
// used up before it arrived (outran: callers waited for it), and how long
// it lasted: the time from asking for it to asking for the next, which at
// a steady rate is one block's worth of IDs (a refill is asked for when
// the block before is half used). As Leaf's segment step follows how long
// a segment lasted:
//
//   - outran, or less than MaxAge/8: demand outruns the refills (half a
//     block went faster than a round trip), or they come more often than
//     needed, each a round trip of CPU for the client and the daemon:
//     double the count, up to MaxBlock, the most a daemon's NEXTBLOCK
//     takes. Only when the last block came whole: a daemon that cut it
//     (at its lead, its reservation) would not give more for a larger
//     count.
//   - more than MaxAge/2, not outran: demand fell; halve it, down to
//     Prefetch. A block used that slowly ages toward MaxAge, where its
//     IDs are dropped. (An outrun block's time includes the wait for it,
//     which growing removes.)
//   - between the two: keep it, so that the size does not swing between
//     two values at a steady rate (doubling a block that lasted just
//     under MaxAge/8 makes one that lasts under MaxAge/4).
//
// Blocks that last at most MaxAge/2 keep their IDs' age under MaxAge (a
// block is asked for half a block before it is used), so a steady rate
// drops none.
func blockSize(size, minSize int64, full, outran bool, lasted, maxAge time.Duration) int64 {
	switch {
	case (outran || lasted < maxAge/8) && full:
		return min(2*size, MaxBlock)
	case lasted > maxAge/2 && !outran:
		return max(size/2, minSize)
	}
	return size
}

// maxUnusable is how many blocks in a row may be dropped on arrival
// before NextID callers get the error.
const maxUnusable = 10

// unusableError is a block dropped on arrival: wholly at or below the last
// block's IDs (a failover to a daemon behind the last one: wait is until
// the last block's tick has passed), or older than MaxAge (the round trip,
// this process or the daemon's clock was slow: ask again at once; with
// every caller waiting, the CPU is the refill's).
type unusableError struct {
	rounds int
	wait   time.Duration
	err    error
}

func (e *unusableError) Error() string { return e.err.Error() }
func (e *unusableError) Unwrap() error { return e.err }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// nextBlock sends NEXTBLOCK n and reads the block.
func nextBlock(ctx context.Context, rdb *redis.Client, n int64) (flake.Block, error) {
	cmd := redis.NewIntSliceCmd(ctx, "nextblock", n)
	_ = rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return flake.Block{}, err
	}
	if len(v) < 3 || v[0] < 0 || v[1] < 1 || v[2] < 1 {
		return flake.Block{}, replyError("NEXTBLOCK %d gave %v, not a block", n, v)
	}
	b := flake.Block{First: uint64(v[0]), Count: v[1], Stride: uint64(v[2])}
	if len(v) > 4 { // one machine ID is never listed; two or more are
		b.MachineIDs = make([]uint64, len(v)-3)
		for i, m := range v[3:] {
			if m < 0 {
				return flake.Block{}, replyError("NEXTBLOCK %d gave machine ID %d", n, m)
			}
			b.MachineIDs[i] = uint64(m)
		}
	} else if len(v) == 4 {
		return flake.Block{}, replyError("NEXTBLOCK %d gave %v: one machine ID listed", n, v)
	}
	return b, nil
}

// isUnknownCommand reports whether err is a daemon's answer that it has
// no NEXTBLOCK: it predates blocks ("unknown command"), or its generator
// has none.
func isUnknownCommand(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.HasPrefix(msg, "err unknown command 'nextblock'") || strings.HasPrefix(msg, "err nextblock is not supported")
}

// stop spends the blocks at Close, so that NextID finds the client
// closed; a NextID running at the same time may still get an ID.
func (p *blocker) stop() {
	p.mu.Lock()
	p.expiry.Stop()
	b := p.buf.Current()
	b.SkipTo(b.N())
	p.buf.DropNextLocked()
	p.mu.Unlock()
}

// wait returns when the refill in flight, if any, and the NEXTIDS
// fallback's refills have stopped (after Close).
func (p *blocker) wait() {
	p.mu.Lock()
	run := p.buf.RunLocked()
	p.mu.Unlock()
	if run != nil {
		run.Stop()
	}
	if pf := p.fallback.Load(); pf != nil {
		pf.wait()
	}
}
