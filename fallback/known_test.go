package fallback_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// Fault: Redis lost everything (a restart without persistence, FLUSHALL)
// under a counter-mode node with layout X that had already been handed
// segments, and a node with another layout Y comes right after. Guard: the
// counter's next fetch restores X as the fleet's layout the way a lease
// owner's renewal does, opening no settle window (it ran under X before,
// so X is the fleet's), so it does not stall for one; Y is refused at
// once, since the layout is stored. A duplicate shows as Y's counter
// issuing next to X's (IDs of two layouts side by side), or as X's values
// after the loss not above those before it.
func TestCounter_TotalLoss_KnownCounterRestoresLayoutWithoutWindow(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		x := flake.DefaultLayout()
		y := layout(t, 10, 14, 10*time.Millisecond, flake.DefaultStartTime)
		// A settle window far longer than the test: waiting for one fails it.
		c := newCounter(t, rdb, fallback.Options{Layout: x, LayoutSettle: time.Minute, MinSegment: 64, MaxSegment: 64})
		if err := rdb.Set(ctx, "{flaked}:layout", x.String(), 0).Err(); err != nil {
			t.Fatal(err) // the fleet's layout, stored before: no window for the first segment either
		}
		var ids []uint64
		for range 200 {
			id, err := c.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for range 200 { // past the current segment: a fetch after the loss
			id, err := c.NextID(idtest.Context(t, 5*time.Second))
			if err != nil {
				t.Fatalf("the counter after Redis lost everything: %v (it must not wait for a settle window)", err)
			}
			ids = append(ids, id)
		}
		if got := rdb.Get(ctx, "{flaked}:layout").Val(); got != x.String() {
			t.Fatalf("layout after the counter's fetch = %q, want %q restored", got, x.String())
		}
		if w := rdb.HGet(ctx, "{flaked}:meta", "layout_settle_ms").Val(); w != "" {
			t.Fatalf("the restoring counter opened a settle window until %s", w)
		}
		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatal("counter IDs not strictly increasing across the loss")
		}
		other := newCounter(t, rdb, fallback.Options{Layout: y, LayoutSettle: time.Minute})
		if _, err := other.NextID(ctx); !errors.Is(err, fallback.ErrLayoutMismatch) {
			t.Fatalf("a counter with another layout after the restore: %v, want ErrLayoutMismatch", err)
		}
	})
}
