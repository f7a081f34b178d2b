package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
)

// Client hands out IDs from flaked daemons. It is safe for concurrent use.
// Create it with New or NewFromURL and Close it when done.
type Client struct {
	opts    Options
	daemons []*daemon
	rr      atomic.Uint64 // round-robin start among equally loaded daemons
	layout  atomic.Pointer[flake.Layout]
	pf      *prefetcher // with Prefetch, when blocks are not used
	bf      *blocker    // with Prefetch: blocks (NEXTBLOCK), NEXTIDS for daemons without them

	closed atomic.Bool
	ctx    context.Context // ends at Close; bounds background refills
	cancel context.CancelFunc
}

// daemon is one daemon's go-redis client and what the client knows of
// its health.
type daemon struct {
	addr      string
	rdb       *redis.Client
	inflight  atomic.Int64
	downUntil atomic.Int64 // unix nanoseconds; 0: not down
	requests  atomic.Uint64
	failures  atomic.Uint64
}

// New returns a client for the daemons of opts. It checks opts but does
// not connect: connections are made by the first requests, and a daemon
// that cannot be reached shows up in their errors.
func New(opts Options) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, addr := range opts.Addrs {
		c.daemons = append(c.daemons, &daemon{addr: addr, rdb: redis.NewClient(redisOptions(addr, &opts))})
	}
	switch {
	case opts.Prefetch > 0 && opts.nextIDsPrefetch:
		c.pf = newPrefetcher(c)
	case opts.Prefetch > 0:
		c.bf = newBlocker(c)
	}
	return c, nil
}

// redisOptions is the go-redis configuration for one daemon.
func redisOptions(addr string, o *Options) *redis.Options {
	return &redis.Options{
		Addr:     addr,
		Protocol: 2, // RESP2 skips the HELLO round trip on connect; IDs are the same integers in RESP3
		Username: o.Username,
		Password: o.Password,
		// Failing over is ours: a failed request goes to the next daemon
		// at once instead of being retried against the same one.
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: true, // the caller's deadline caps each wait
		PoolSize:              o.PoolSize,
		TLSConfig:             o.TLS,
	}
}

// NextID returns a new ID: from the prefetched blocks when Prefetch is
// set (one atomic add while a block lasts; NEXTIDS batches from daemons
// without NEXTBLOCK), else from a daemon's NEXTID. It fails only when no daemon answered in
// time (an *Error), the context ended, or the client is closed.
func (c *Client) NextID(ctx context.Context) (uint64, error) {
	if c.bf != nil {
		return c.bf.nextID(ctx)
	}
	if c.pf != nil {
		return c.pf.next(ctx)
	}
	var id uint64
	err := c.do(ctx, "NEXTID", func(ctx context.Context, rdb *redis.Client) error {
		cmd := redis.NewIntCmd(ctx, "nextid")
		_ = rdb.Process(ctx, cmd)
		v, err := cmd.Result()
		if err != nil {
			return err
		}
		if v < 0 {
			return replyError("NEXTID gave %d, not an ID", v)
		}
		id = uint64(v)
		return nil
	})
	return id, err
}

// NextIDs returns n new IDs (1..10,000,000), strictly increasing, all
// from one daemon. Up to MaxBatch it is one NEXTIDS command; beyond, it
// is several, pipelined on one connection. It does not use the prefetch
// buffer. All or nothing: on an error no ID is returned.
func (c *Client) NextIDs(ctx context.Context, n int) ([]uint64, error) {
	if n < 1 || n > MaxNextIDs {
		return nil, fmt.Errorf("flaked client: NEXTIDS: %w %d, valid range is 1..%d", ErrInvalidCount, n, MaxNextIDs)
	}
	ids := make([]uint64, n)
	err := c.do(ctx, "NEXTIDS "+strconv.Itoa(n), func(ctx context.Context, rdb *redis.Client) error {
		return c.fetch(ctx, rdb, ids)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// fetch fills ids from one daemon, in commands of at most MaxBatch IDs
// sent in one pipeline. A failed attempt leaves ids partly written; the
// next attempt overwrites all of it.
func (c *Client) fetch(ctx context.Context, rdb *redis.Client, ids []uint64) error {
	var cmds []*redis.IntSliceCmd
	var wants []int
	if len(ids) <= c.opts.MaxBatch {
		cmd := redis.NewIntSliceCmd(ctx, "nextids", len(ids))
		_ = rdb.Process(ctx, cmd)
		cmds, wants = append(cmds, cmd), append(wants, len(ids))
	} else {
		pipe := rdb.Pipeline()
		for off := 0; off < len(ids); off += c.opts.MaxBatch {
			n := min(c.opts.MaxBatch, len(ids)-off)
			cmd := redis.NewIntSliceCmd(ctx, "nextids", n)
			_ = pipe.Process(ctx, cmd)
			cmds, wants = append(cmds, cmd), append(wants, n)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	off := 0
	for i, cmd := range cmds {
		vals, err := cmd.Result()
		if err != nil {
			return err
		}
		if len(vals) != wants[i] {
			return replyError("NEXTIDS %d gave %d IDs", wants[i], len(vals))
		}
		for _, v := range vals {
			// A daemon's IDs increase strictly; anything else is a
			// broken reply, and none of its IDs can be trusted.
			if v < 0 {
				return replyError("NEXTIDS %d gave %d, not an ID", wants[i], v)
			}
			if off > 0 && uint64(v) <= ids[off-1] {
				return replyError("NEXTIDS %d gave %d after %d: IDs must increase strictly", wants[i], v, ids[off-1])
			}
			ids[off] = uint64(v)
			off++
		}
	}
	return nil
}

// do runs fn against one daemon, the least busy, and on failure against
// each other daemon in turn (those that failed lately last) until one
// succeeds. It fails when every daemon failed, the caller's context ended,
// or the client was closed.
//
// Retrying is safe for uniqueness: fn only asks for new IDs and keeps
// what it read only when it returns nil. A failed attempt's reply is lost
// with its connection, which go-redis closes on any read or write error
// (timeouts included), so a late reply is never read as the answer to a
// later request.
func (c *Client) do(ctx context.Context, op string, fn func(context.Context, *redis.Client) error) error {
	if c.closed.Load() {
		return fmt.Errorf("flaked client: %s: %w", op, ErrClosed)
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	first := c.pick()
	err := c.try(ctx, first, fn)
	if err == nil {
		return nil
	}
	attempts := []Attempt{{first.addr, explain(err, &c.opts)}}
	for _, d := range c.failoverOrder(first) {
		if err := c.stopped(ctx, op, attempts); err != nil {
			return err
		}
		err := c.try(ctx, d, fn)
		if err == nil {
			return nil
		}
		attempts = append(attempts, Attempt{d.addr, explain(err, &c.opts)})
	}
	if err := c.stopped(ctx, op, attempts); err != nil {
		return err
	}
	return &Error{Op: op, Attempts: attempts}
}

// bound caps ctx at Options.Wait from now: the longest one call may
// take, retries and failover included.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.Wait)
}

// stopped returns the error that ends a request early: the client was
// closed, or the caller's context ended.
func (c *Client) stopped(ctx context.Context, op string, attempts []Attempt) error {
	if c.closed.Load() {
		return fmt.Errorf("flaked client: %s: %w", op, ErrClosed)
	}
	if err := ctxErr(ctx); err != nil {
		return &Error{Op: op, Attempts: attempts, Ctx: err}
	}
	return nil
}

// ctxErr is ctx.Err(), or DeadlineExceeded as soon as the deadline is
// past: go-redis's socket deadline is the context's, and may fire before
// the context's own timer does.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// try runs fn against d and keeps d's health up to date. A failure the
// caller caused (its context ended) does not count against d.
func (c *Client) try(ctx context.Context, d *daemon, fn func(context.Context, *redis.Client) error) error {
	d.requests.Add(1)
	d.inflight.Add(1)
	err := fn(ctx, d.rdb)
	d.inflight.Add(-1)
	switch {
	case err == nil:
		if d.downUntil.Load() != 0 {
			d.downUntil.Store(0)
		}
	case ctxErr(ctx) == nil && !c.closed.Load():
		d.failures.Add(1)
		d.downUntil.Store(c.opts.Now().Add(c.opts.DownFor).UnixNano())
	}
	return err
}

// pick returns the daemon with the fewest requests in flight among those
// not down, starting from a rotating position so that equals take turns.
// When all are down it returns the next in turn: they are still tried.
func (c *Client) pick() *daemon {
	ds := c.daemons
	if len(ds) == 1 {
		return ds[0]
	}
	start := int(c.rr.Add(1) % uint64(len(ds)))
	var best *daemon
	var bestLoad, now int64
	for i := range ds {
		d := ds[(start+i)%len(ds)]
		if u := d.downUntil.Load(); u != 0 {
			if now == 0 {
				now = c.opts.Now().UnixNano()
			}
			if now < u {
				continue
			}
		}
		if load := d.inflight.Load(); best == nil || load < bestLoad {
			best, bestLoad = d, load
		}
	}
	if best == nil {
		return ds[start]
	}
	return best
}

// failoverOrder is the order the other daemons are tried in after first
// failed: those not down, then those down, each in turn after first.
func (c *Client) failoverOrder(first *daemon) []*daemon {
	ds := c.daemons
	at := 0
	for i, d := range ds {
		if d == first {
			at = i
		}
	}
	now := c.opts.Now().UnixNano()
	up := make([]*daemon, 0, len(ds)-1)
	var down []*daemon
	for i := 1; i < len(ds); i++ {
		d := ds[(at+i)%len(ds)]
		if now < d.downUntil.Load() {
			down = append(down, d)
		} else {
			up = append(up, d)
		}
	}
	return append(up, down...)
}

// Stats are a client's counters since New.
type Stats struct {
	Daemons []DaemonStats
	// Prefetched is how many IDs prefetched blocks and batches brought;
	// Expired how many of them were dropped unused, older than MaxAge (or,
	// after a failover, at or below the IDs of the previous daemon's
	// block); Waits how many times a NextID found the buffer empty and
	// waited for a block or batch (with NEXTIDS batches, raise Prefetch
	// if that keeps growing in steady use; blocks grow by themselves, up
	// to MaxBlock or as many IDs as a daemon gives at once).
	Prefetched, Expired, Waits uint64
	// BlockSize is the count NextID asked the last block for: Prefetch at
	// first, up to MaxBlock while demand outruns the refills, back toward
	// Prefetch when it falls (Options.Prefetch). 0 when NextID is not
	// served from blocks.
	BlockSize int64
}

// DaemonStats are one daemon's counters.
type DaemonStats struct {
	Addr     string
	Requests uint64 // requests sent (a NextIDs pipeline counts once)
	Failures uint64 // of which failed: error reply, connection error, timeout
	Down     bool   // failed within the last DownFor: tried after the others
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	var s Stats
	now := c.opts.Now().UnixNano()
	for _, d := range c.daemons {
		s.Daemons = append(s.Daemons, DaemonStats{
			Addr:     d.addr,
			Requests: d.requests.Load(),
			Failures: d.failures.Load(),
			Down:     now < d.downUntil.Load(),
		})
	}
	pf := c.pf
	if c.bf != nil {
		s.Prefetched, s.Expired, s.Waits = c.bf.prefetched.Load(), c.bf.expired.Load(), c.bf.waits.Load()
		pf = c.bf.fallback.Load()
		if pf == nil {
			s.BlockSize = c.bf.size.Load()
		}
	}
	if pf != nil {
		s.Prefetched += pf.prefetched.Load()
		s.Expired += pf.expired.Load()
		s.Waits += pf.waits.Load()
	}
	return s
}

// Close stops the prefetch refill, waits for it, and closes every
// connection. Calls in progress and later return ErrClosed. Closing twice
// is a no-op.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	if c.bf != nil {
		c.bf.stop()
	}
	// Closing the pools first also ends a refill blocked on a read.
	var errs []error
	for _, d := range c.daemons {
		if err := d.rdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("flaked client: closing %s: %w", d.addr, err))
		}
	}
	if c.pf != nil {
		c.pf.wait()
	}
	if c.bf != nil {
		c.bf.wait()
	}
	return errors.Join(errs...)
}
