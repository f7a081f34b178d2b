package fallback

import (
	"context"
	"fmt"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/segment"
)

// TryNextBlock hands out up to n consecutive IDs of the current segment as
// one flake.Block (under the counter machine ID, so Stride steps one
// counter value) if the segment has any left: it never waits on Redis.
// It takes them with one atomic add, as NextIDs does, so the block is
// issued exactly like its IDs one by one; it is cut at the segment's end
// (fewer than n IDs, never more). false takes nothing.
func (c *Counter) TryNextBlock(n int64) (flake.Block, bool) {
	if n < 1 {
		return flake.Block{}, false
	}
	return c.take(c.buf.Current(), n)
}

// NextBlock is TryNextBlock that waits for a segment when the buffer is
// spent, bounded by ctx (as NextID does).
func (c *Counter) NextBlock(ctx context.Context, n int64) (flake.Block, error) {
	if n < 1 {
		return flake.Block{}, fmt.Errorf("block of %d IDs: want >= 1", n)
	}
	for {
		s := c.buf.Current()
		if b, ok := c.take(s, n); ok {
			return b, nil
		}
		if err := c.await(ctx, s); err != nil {
			return flake.Block{}, err
		}
	}
}

// take adds n to s's next index and keeps what falls inside the segment.
// Indices past its end were spent already (another caller's add, Close or
// SetFloor took them), so an add that lands there issues nothing and
// takes nothing anyone could have.
func (c *Counter) take(s *segment.Segment[span], n int64) (flake.Block, bool) {
	if s.Spent() {
		return flake.Block{}, false
	}
	n = min(n, s.N()) // a block never holds more than a segment; no add can overflow next
	i, got := s.Take(n)
	if got == 0 {
		return flake.Block{}, false
	}
	if s.Triggers(i, got) {
		c.buf.Prefetch(s)
	}
	return flake.Block{First: c.id(s.Meta.first + uint64(i)), Count: got, Stride: 1 << c.shift}, true
}
