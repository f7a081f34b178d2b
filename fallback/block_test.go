package fallback_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// Fault: a counter block reaching past its segment (into values another
// node's segment holds) or overlapping IDs taken one by one. Two counters
// share the Redis counter, as two nodes in counter mode do; goroutines
// take blocks, batches and single IDs from both. Every block stays inside
// one segment (its IDs are a run of the counter's values under the
// counter machine ID), and no ID is issued twice.
func TestCounter_Blocks_NoDuplicates(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := layout(t, 16, 8, 10*time.Millisecond, time.Time{})
		ctx := idtest.Context(t, 20*time.Second)
		counters := []*fallback.Counter{
			newCounter(t, rdb, fallback.Options{Layout: l, MinSegment: 100, MaxSegment: 5000}),
			newCounter(t, rdb, fallback.Options{Layout: l, MinSegment: 100, MaxSegment: 5000}),
		}
		const goroutines, each = 6, 40_000
		results := make([][]uint64, goroutines)
		var wg sync.WaitGroup
		for g := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := counters[g%2]
				ids := make([]uint64, 0, each+3000)
				buf := make([]uint64, 7)
				for len(ids) < each {
					switch g % 3 {
					case 0:
						b, err := c.NextBlock(ctx, int64(1+len(ids)%3000))
						if err != nil {
							t.Errorf("goroutine %d: %v", g, err)
							return
						}
						if err := b.Check(l); err != nil || b.Stride != 1<<l.BitsMachineID || b.MachineIDs != nil {
							t.Errorf("block %+v: %v", b, err)
							return
						}
						for i := range b.Count {
							ids = append(ids, b.ID(i))
						}
					case 1:
						if b, ok := c.TryNextBlock(500); ok {
							for i := range b.Count {
								ids = append(ids, b.ID(i))
							}
							continue
						}
						id, err := c.NextID(ctx)
						if err != nil {
							t.Errorf("goroutine %d: %v", g, err)
							return
						}
						ids = append(ids, id)
					case 2:
						n, err := c.NextIDs(ctx, buf)
						if err != nil {
							t.Errorf("goroutine %d: %v", g, err)
							return
						}
						ids = append(ids, buf[:n]...)
					}
				}
				results[g] = ids
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		checkCounterIDs(t, l, increasingEach(t, l, results))
	})
}

// A counter block never reaches past its segment: with segments of 100
// values a block of 1,000 holds at most what is left of the current one.
// Fault: a block past the segment would issue values of the next segment
// Redis hands to another node. Once the counter is closed (a mode switch)
// no block comes out, and LastTick covers every block's ticks.
func TestCounter_Block_CutAtSegment_CountedByLastTick(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := flake.DefaultLayout()
		ctx := idtest.Context(t, 10*time.Second)
		c := newCounter(t, rdb, fallback.Options{MinSegment: 100, MaxSegment: 100})
		first, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.NextBlock(ctx, math.MaxInt64) // as much as may be issued: the segment's rest
		if err != nil {
			t.Fatal(err)
		}
		if b.Count != 99 || b.First != first+1<<l.BitsMachineID {
			t.Fatalf("block %+v after ID %d: want the 99 values left of the segment of 100, right after it", b, first)
		}
		var all []uint64
		for range 5 {
			b, err := c.NextBlock(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if b.Count > 100 {
				t.Fatalf("block of %d IDs from segments of 100", b.Count)
			}
			for i := range b.Count {
				all = append(all, b.ID(i))
			}
		}
		idtest.Increasing(t, l, "blocks", all)
		c.Close()
		if b, ok := c.TryNextBlock(1); ok {
			t.Fatalf("block %+v after Close", b)
		}
		last := c.LastTick()
		for _, id := range all {
			if tick := l.Decompose(id).Tick; tick > last {
				t.Fatalf("block ID at tick %d above the closed counter's LastTick %d", tick, last)
			}
		}
	})
}
