package fallback_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// Fault: Redis lost everything (a restart without persistence, FLUSHALL)
// under a counter of layout X that had been handed segments, and a
// counter of another layout Y, which never ran, fetches first. Guard:
// only a counter that ran under the registry restores it (guard.lua): Y
// is refused with ErrNoRegistry and stores nothing, X's next fetch
// restores {ns}:meta and X at once, and Y is refused with
// ErrLayoutMismatch from then on. A duplicate shows as Y issuing at all
// (IDs of two layouts side by side: Y's counter IDs can equal X's), or
// as X's values after the loss not above those before it.
func TestCounter_TotalLoss_KnownCounterRestoresRegistry(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		x := flake.DefaultLayout()
		y := layout(t, 10, 14, 10*time.Millisecond, flake.DefaultStartTime)
		c := newCounter(t, rdb, fallback.Options{Layout: x, MinSegment: 64, MaxSegment: 64})
		var ids []uint64
		for range 200 {
			id, err := c.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		<-c.FetchDone() // no fetch of X's runs beside Y's below
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		stray := bareCounter(t, rdb, fallback.Options{Layout: y})
		if id, err := stray.NextID(ctx); !errors.Is(err, fallback.ErrNoRegistry) || !strings.Contains(err.Error(), "flaked init") {
			t.Fatalf("a counter of layout %v that never ran, after the loss: %d, %v; want ErrNoRegistry naming flaked init", y, id, err)
		}
		if n := rdb.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("the refused counter wrote %d keys: %v", n, rdb.Keys(ctx, "*").Val())
		}
		for range 200 { // past the current segment: a fetch after the loss
			id, err := c.NextID(idtest.Context(t, 5*time.Second))
			if err != nil {
				t.Fatalf("the counter that ran under %v, after Redis lost everything: %v", x, err)
			}
			ids = append(ids, id)
		}
		if got := rdb.Get(ctx, "{flaked}:layout").Val(); got != x.String() {
			t.Fatalf("layout after the counter's fetch = %q, want %q restored", got, x.String())
		}
		if g := rdb.HGet(ctx, "{flaked}:meta", "generation").Val(); g == "" {
			t.Fatal("{flaked}:meta not restored with a generation")
		}
		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatal("counter IDs not strictly increasing across the loss")
		}
		if _, err := stray.NextID(ctx); !errors.Is(err, fallback.ErrLayoutMismatch) {
			t.Fatalf("the counter of layout %v after the restore: %v, want ErrLayoutMismatch", y, err)
		}
	})
}

// Fault: Redis lost everything under a node that ran under the registry,
// and the node's counter is a new one that never had a segment (a node
// falling back to counter mode after the loss). Guard: Options.Known,
// which node sets from its lease and registry, lets that counter restore
// the registry; its values start above the loss floor (loss + skew +
// lead), so above every value handed out before. A duplicate shows as a
// value after the loss at or below one before it.
func TestCounter_TotalLoss_KnownOptionRestoresRegistry(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		before := newCounter(t, rdb, fallback.Options{MinSegment: 64, MaxSegment: 64})
		var last uint64
		for range 100 {
			id, err := before.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			last = id
		}
		before.Close()
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := bareCounter(t, rdb, fallback.Options{}).NextID(ctx); !errors.Is(err, fallback.ErrNoRegistry) {
			t.Fatalf("a new counter without Known after the loss: %v, want ErrNoRegistry", err)
		}
		after := bareCounter(t, rdb, fallback.Options{Known: true})
		if err := after.CheckLayout(ctx); err != nil {
			t.Fatalf("CheckLayout of a counter that knows the registry, none stored: %v", err)
		}
		id, err := after.NextID(ctx)
		if err != nil {
			t.Fatalf("a counter with Known after the loss: %v", err)
		}
		if id <= last {
			t.Fatalf("first ID after the loss %d is not above the last before it %d", id, last)
		}
		if got := rdb.Get(ctx, "{flaked}:layout").Val(); got != flake.DefaultLayout().String() {
			t.Fatalf("layout after the restore = %q", got)
		}
	})
}
