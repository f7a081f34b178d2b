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

	"github.com/flaked/flaked/flake"
)

// cblock is one block (NEXTBLOCK) being handed out: IDs are taken with
// one atomic add on next, so NextID takes no lock while the block lasts.
type cblock struct {
	// next is the index of the next ID to hand out; >= n: spent. It sits
	// alone on its cache line: it is the only word every NextID writes.
	_    [64]byte
	next atomic.Int64
	_    [56]byte

	n        int64
	first    uint64 // ID of index 0
	stride   uint64
	base     uint64   // with several machine IDs: first's step, machine bits 0
	machines []uint64 // nil under one machine ID
	j0, k    uint64   // first's index in machines; len(machines)
	refillAt int64    // taking this index asks for the next block
	deadline time.Time
	daemon   *daemon
	dropped  bool // expired before it was used up; under mu
}

// id is the block's i-th ID (flake.Block.ID, with the machine index
// looked up once).
func (b *cblock) id(i int64) uint64 {
	if b.k == 0 {
		return b.first + uint64(i)*b.stride
	}
	j := b.j0 + uint64(i)
	return b.base + j/b.k*b.stride + b.machines[j%b.k]
}

// skipTo makes sure no index below i is handed out from now on, and
// returns how many indices it took (IDs dropped unused).
func (b *cblock) skipTo(i int64) int64 {
	i = min(i, b.n)
	for {
		old := b.next.Load()
		if old >= i {
			return 0
		}
		if b.next.CompareAndSwap(old, i) {
			return i - old
		}
	}
}

func (b *cblock) spent() bool { return b.next.Load() >= b.n }

// errNoBlocks: the daemon predates NEXTBLOCK; NextID uses NEXTIDS.
var errNoBlocks = errors.New("daemon has no NEXTBLOCK")

// blocker serves NextID from blocks that one background goroutine fetches
// with NEXTBLOCK: double buffering, the next block is fetched when half
// of the current one is used, so NextID rarely waits and never takes a
// lock while a block lasts. Blocks from one daemon increase (its IDs do);
// a block from another daemon, after a failover, is cut so that it starts
// above the last block, so the IDs NextID returns increase in the order
// it returns them. IDs expire MaxAge after the earlier of their block's
// request and its first ID's tick: a timer spends the block then.
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
// daemons answered, or why their blocks could not be used).
//
// When the daemon answers NEXTBLOCK with "unknown command", the client
// switches to NEXTIDS batches (prefetcher) for good.
type blocker struct {
	c       *Client
	minSize int64 // Prefetch: the first blocks' size, and the smallest
	maxAge  time.Duration

	// size is the count the last NEXTBLOCK asked for (Stats.BlockSize);
	// written by run only.
	size atomic.Int64
	// Of the last block received, for the next refill's size; run's own.
	// askedAt is zero once used, so that retries after a failed refill
	// do not count as blocks that lasted no time.
	askedAt time.Time
	full    bool // it had all the IDs asked for

	cur      atomic.Pointer[cblock]
	fallback atomic.Pointer[prefetcher] // set when the daemons predate NEXTBLOCK

	kick chan struct{}
	done chan struct{}

	mu       sync.Mutex
	next     *cblock // fetched, not current yet
	last     uint64  // last ID of the latest block accepted
	hasLast  bool
	unusable int // blocks in a row dropped on arrival (unusableError)
	// outran: the last block received arrived after the one before it
	// was used up (callers waited for it); cleared when a block expires,
	// as demand has fallen since.
	outran bool
	err    error // the last refill's error, nil after a success
	ready  chan struct{}
	expiry *time.Timer

	prefetched, expired, waits atomic.Uint64
}

func newBlocker(c *Client) *blocker {
	p := &blocker{
		c:       c,
		minSize: int64(c.opts.Prefetch),
		maxAge:  c.opts.MaxAge,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		ready:   make(chan struct{}),
	}
	p.size.Store(p.minSize)
	p.cur.Store(&cblock{}) // spent: the first NextID asks for a block
	p.expiry = time.AfterFunc(time.Hour, func() {
		p.mu.Lock()
		p.expireLocked()
		p.mu.Unlock()
	})
	p.expiry.Stop()
	go p.run()
	return p
}

// nextID hands out the next ID of the current block: one atomic add in
// the common case.
func (p *blocker) nextID(ctx context.Context) (uint64, error) {
	b := p.cur.Load()
	if i := b.next.Add(1) - 1; i < b.n {
		if i == b.refillAt {
			p.wake()
		}
		return b.id(i), nil
	}
	// The slow path. It waits as long as ctx allows, not Options.Wait:
	// while refills succeed the caller gets an ID, however many blocks
	// other callers spend first; a refill that fails (bounded by Wait)
	// ends the wait with its error.
	for {
		b := p.cur.Load()
		i := b.next.Add(1) - 1
		if i < b.n {
			if i == b.refillAt {
				p.wake()
			}
			return b.id(i), nil
		}
		if pf := p.fallback.Load(); pf != nil {
			return pf.next(ctx) // bounds its own wait by Options.Wait
		}
		if err := p.await(ctx, b); err != nil {
			if errors.Is(err, errNoBlocks) {
				continue // the fallback is set
			}
			return 0, err
		}
	}
}

// await is the slow path, once b is spent: it makes the fetched block
// current, or waits for a refill. nil means try again; an error is the
// refill's that this caller waited for (the daemons' answers), or ctx's.
func (p *blocker) await(ctx context.Context, b *cblock) error {
	if p.c.closed.Load() {
		return fmt.Errorf("flaked client: NEXTID: %w", ErrClosed)
	}
	p.mu.Lock()
	for {
		if p.cur.Load() != b {
			p.mu.Unlock()
			return nil
		}
		p.expireLocked()
		if p.next != nil {
			p.installLocked(p.next)
			p.next = nil
			p.mu.Unlock()
			return nil
		}
		if p.fallback.Load() != nil {
			p.mu.Unlock()
			return errNoBlocks
		}
		p.wake()
		p.waits.Add(1)
		ready := p.ready
		p.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return fmt.Errorf("flaked client: NEXTID: waiting for a prefetch block: %w", ctx.Err())
		case <-p.c.ctx.Done():
			return fmt.Errorf("flaked client: NEXTID: %w", ErrClosed)
		}
		p.mu.Lock()
		if p.cur.Load() == b && p.next == nil && p.err != nil {
			err := p.err
			p.mu.Unlock()
			return err
		}
	}
}

// installLocked makes nb the current block; the old one is spent (or
// expired). It arms the expiry timer for nb.
func (p *blocker) installLocked(nb *cblock) {
	p.cur.Store(nb)
	p.expiry.Reset(max(nb.deadline.Sub(p.c.opts.Now()), 0))
}

// expireLocked spends the current block and drops the fetched one when
// MaxAge has passed for them.
func (p *blocker) expireLocked() {
	now := p.c.opts.Now()
	if b := p.cur.Load(); b.n > 0 && now.After(b.deadline) {
		b.dropped = true
		p.outran = false
		p.expired.Add(uint64(b.skipTo(b.n)))
	}
	if p.next != nil && now.After(p.next.deadline) {
		p.expired.Add(uint64(p.next.n - p.next.next.Load()))
		p.next = nil
	}
}

// wake asks for a refill without waiting.
func (p *blocker) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// needLocked reports whether a block should be fetched: none is waiting
// and half of the current one is used (or it is spent).
func (p *blocker) needLocked() bool {
	b := p.cur.Load()
	return p.next == nil && (b.spent() || b.next.Load() > b.refillAt)
}

// run fetches one block per kick that finds one needed, until the client
// is closed.
func (p *blocker) run() {
	defer close(p.done)
	ctx := p.c.ctx
	for {
		select {
		case <-p.kick:
		case <-ctx.Done():
			p.expiry.Stop()
			return
		}
		p.mu.Lock()
		p.expireLocked()
		need, outran := p.needLocked(), p.outran
		p.mu.Unlock()
		if !need {
			continue
		}
		size := p.size.Load()
		if !p.askedAt.IsZero() {
			size = blockSize(size, p.minSize, p.full, outran, p.c.opts.Now().Sub(p.askedAt), p.maxAge)
			p.size.Store(size)
			p.askedAt = time.Time{}
		}
		at := p.c.opts.Now()
		nb, err := p.fetch(ctx, size)
		if errors.Is(err, errNoBlocks) {
			p.mu.Lock()
			p.fallback.Store(newPrefetcher(p.c))
			close(p.ready)
			p.ready = make(chan struct{})
			p.mu.Unlock()
			p.expiry.Stop()
			return
		}
		var unusable *unusableError
		if errors.As(err, &unusable) && unusable.rounds <= maxUnusable {
			// Ask again after its wait while NextID callers keep waiting:
			// the next block may do. Past maxUnusable blocks in a row they
			// get the error below, and the refill asks again only when one
			// waits.
			t := time.NewTimer(unusable.wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			p.wake()
			continue
		}
		p.mu.Lock()
		if err == nil {
			cur := p.cur.Load()
			p.askedAt, p.full = at, nb.n == size
			p.outran = cur.n > 0 && cur.spent() && !cur.dropped
			if cur.spent() {
				p.installLocked(nb)
			} else {
				p.next = nb
			}
		}
		p.err = err
		close(p.ready)
		p.ready = make(chan struct{})
		p.mu.Unlock()
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
	if prev := p.cur.Load().daemon; prev == nil || p.c.try(ctx, prev, fn) != nil {
		err = p.c.do(ctx, "NEXTBLOCK "+strconv.FormatInt(size, 10)+" (prefetch)", fn)
	}
	if err != nil {
		return nil, err
	}
	if unsupported {
		return nil, errNoBlocks
	}
	return p.accept(fb, from, at, layout)
}

// accept turns a block received at request time at into a cblock: its
// deadline, and its start above the last block's.
func (p *blocker) accept(fb flake.Block, from *daemon, at time.Time, l flake.Layout) (*cblock, error) {
	tickAt := l.TickTime(l.Decompose(fb.First).Tick)
	nb := &cblock{
		n: fb.Count, first: fb.First, stride: fb.Stride, machines: fb.MachineIDs,
		deadline: minTime(at, tickAt).Add(p.maxAge), daemon: from,
	}
	if k := len(fb.MachineIDs); k > 0 {
		m := fb.First & (fb.Stride - 1)
		nb.base, nb.k = fb.First-m, uint64(k)
		nb.j0 = uint64(sort.Search(k, func(i int) bool { return fb.MachineIDs[i] >= m }))
	}
	p.prefetched.Add(uint64(nb.n))
	p.mu.Lock()
	defer p.mu.Unlock()
	// Strictly above every ID handed out before: a block from another
	// daemon may start lower; its IDs up to the last block's are dropped.
	if p.hasLast && nb.first <= p.last {
		skip := int64(sort.Search(int(nb.n), func(i int) bool { return nb.id(int64(i)) > p.last }))
		nb.next.Store(skip)
		p.expired.Add(uint64(skip))
		if skip == nb.n {
			p.unusable++
			wait := time.Until(l.TickTime(l.Decompose(p.last).Tick + 1))
			return nil, &unusableError{rounds: p.unusable, wait: min(max(wait, time.Millisecond), time.Second), err: replyError(
				"NEXTBLOCK from %s gave IDs up to %d, at or below the last block's %d (a daemon behind the one before it, by %v): dropped, %d blocks in a row",
				from.addr, nb.id(nb.n-1), p.last, wait, p.unusable)}
		}
	}
	if now := p.c.opts.Now(); now.After(nb.deadline) {
		p.expired.Add(uint64(nb.n - nb.next.Load()))
		p.unusable++
		return nil, &unusableError{rounds: p.unusable, err: fmt.Errorf(
			"flaked client: a block arrived %v after it was asked for, its first ID's tick %v old, more than MaxAge %v, so its IDs were dropped (%d blocks in a row): raise MaxAge",
			now.Sub(at), now.Sub(tickAt), p.maxAge, p.unusable)}
	}
	p.unusable = 0
	p.last, p.hasLast = nb.id(nb.n-1), true
	nb.refillAt = nb.next.Load() + (nb.n-nb.next.Load())/2
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
	b := p.cur.Load()
	b.skipTo(b.n)
	p.next = nil
	p.mu.Unlock()
}

// wait returns when the refill goroutine, and the NEXTIDS fallback's if
// any, have stopped (after Close).
func (p *blocker) wait() {
	<-p.done
	if pf := p.fallback.Load(); pf != nil {
		pf.wait()
	}
}
