package client

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// batch is IDs from one NEXTIDS reply, not handed out yet.
type batch struct {
	ids []uint64
	at  time.Time // when they were asked for: no ID in it is older
}

// prefetcher serves NextID from batches that one background goroutine
// fetches with NEXTIDS, one batch at a time. A refill starts when the
// buffer falls to one batch (double buffering: the next batch is on its
// way while the current one is used), so the buffer holds at most two
// batches. IDs are popped under mu: each is handed out once.
type prefetcher struct {
	c      *Client
	size   int
	low    int // refill when this many IDs or fewer are left
	maxAge time.Duration
	op     string

	kick chan struct{} // a refill is wanted (one pending kick is enough)
	done chan struct{} // closed when the refill goroutine has returned

	mu    sync.Mutex
	queue []batch       // oldest first
	count int           // IDs in queue
	err   error         // the last refill's error, nil after a success
	ready chan struct{} // closed, and replaced, at the end of each refill

	prefetched, expired, waits atomic.Uint64
}

func newPrefetcher(c *Client) *prefetcher {
	p := &prefetcher{
		c:      c,
		size:   c.opts.Prefetch,
		low:    c.opts.Prefetch,
		maxAge: c.opts.MaxAge,
		op:     "NEXTIDS " + strconv.Itoa(c.opts.Prefetch) + " (prefetch)",
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		ready:  make(chan struct{}),
	}
	go p.run()
	return p
}

// next pops the oldest ID not older than MaxAge, waiting for a refill
// when there is none. When the refill it waited for failed and nothing
// is left, it returns that refill's error.
func (p *prefetcher) next(ctx context.Context) (uint64, error) {
	if p.c.closed.Load() {
		return 0, fmt.Errorf("flaked client: NEXTID: %w", ErrClosed)
	}
	var cancel context.CancelFunc // the wait's bound (Options.Wait), set when the caller first waits
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	p.mu.Lock()
	for {
		p.expire()
		if p.count > 0 {
			b := &p.queue[0]
			id := b.ids[0]
			b.ids = b.ids[1:]
			p.count--
			if len(b.ids) == 0 {
				p.queue[0] = batch{}
				p.queue = p.queue[1:]
			}
			if p.count <= p.low {
				p.wake()
			}
			p.mu.Unlock()
			return id, nil
		}
		p.wake()
		p.waits.Add(1)
		ready := p.ready
		p.mu.Unlock()
		if cancel == nil {
			ctx, cancel = p.c.bound(ctx)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return 0, fmt.Errorf("flaked client: NEXTID: waiting for a prefetch batch: %w", ctx.Err())
		case <-p.c.ctx.Done():
			return 0, fmt.Errorf("flaked client: NEXTID: %w", ErrClosed)
		}
		p.mu.Lock()
		if p.count == 0 && p.err != nil {
			err := p.err
			p.mu.Unlock()
			return 0, err
		}
	}
}

// expire drops the batches older than MaxAge. Batches are in the order
// they were asked for, so the old ones are at the front.
func (p *prefetcher) expire() {
	if p.count == 0 {
		return
	}
	now := p.c.opts.Now()
	for len(p.queue) > 0 && now.Sub(p.queue[0].at) > p.maxAge {
		n := len(p.queue[0].ids)
		p.count -= n
		p.expired.Add(uint64(n))
		p.queue[0] = batch{}
		p.queue = p.queue[1:]
	}
}

// wake asks for a refill without waiting.
func (p *prefetcher) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run refills the buffer once per kick until the client is closed.
func (p *prefetcher) run() {
	defer close(p.done)
	ctx := p.c.ctx
	for {
		select {
		case <-p.kick:
		case <-ctx.Done():
			return
		}
		// Kicks that came while the last refill was on its way may be
		// answered by it already.
		p.mu.Lock()
		p.expire()
		need := p.count <= p.low
		p.mu.Unlock()
		if !need {
			continue
		}
		at := p.c.opts.Now()
		ids := make([]uint64, p.size)
		err := p.c.do(ctx, p.op, func(ctx context.Context, rdb *redis.Client) error {
			return p.c.fetch(ctx, rdb, ids)
		})
		if err == nil {
			p.prefetched.Add(uint64(len(ids)))
			if took := p.c.opts.Now().Sub(at); took > p.maxAge {
				err = lateBatchError(took, p.maxAge)
				p.expired.Add(uint64(len(ids)))
			}
		}
		p.mu.Lock()
		if err == nil {
			p.queue = append(p.queue, batch{ids: ids, at: at})
			p.count += len(ids)
		}
		p.err = err
		close(p.ready)
		p.ready = make(chan struct{})
		p.mu.Unlock()
	}
}

// wait returns when the refill goroutine has stopped (after Close).
func (p *prefetcher) wait() { <-p.done }
