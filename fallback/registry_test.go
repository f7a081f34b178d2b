package fallback_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/statefile"
)

// noKeys fails when rdb holds any key: what a refused counter must leave.
func noKeys(ctx context.Context, t *testing.T, rdb redis.UniversalClient, what string) {
	t.Helper()
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("%s wrote %v", what, keys)
	}
}

// Fault: a counter on a namespace flaked init never made (a new fleet
// nobody initialised, a typo in --namespace, or a Redis that lost
// everything) cannot tell a new fleet from a lost one, nor whether its
// layout is the fleet's. Guard: counter.lua refuses it (NOREGISTRY) before
// any write, and the error names flaked init; CheckLayout, which a node in
// counter mode runs at start, says the same. Run twice, with a Redis
// emptied in between: a counter that never ran makes no registry either
// time (the stray-layout counter that remade the registry after each loss
// with a layout of its own, which the simulator found, cannot). A
// duplicate would start with a key written here: a registry of this
// counter's layout, whose IDs can equal those of the fleet's.
func TestCounter_EmptyNamespace_NoRegistry(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		for round := range 2 {
			c := bareCounter(t, rdb, fallback.Options{})
			err := c.CheckLayout(ctx)
			if !errors.Is(err, fallback.ErrNoRegistry) || !strings.Contains(err.Error(), "flaked init") {
				t.Fatalf("round %d: CheckLayout on an empty namespace: %v; want ErrNoRegistry naming flaked init", round, err)
			}
			id, err := c.NextID(ctx)
			if !errors.Is(err, fallback.ErrNoRegistry) || !strings.Contains(err.Error(), "flaked init") {
				t.Fatalf("round %d: NextID on an empty namespace: %d, %v; want ErrNoRegistry naming flaked init", round, id, err)
			}
			if n, err := c.NextIDs(ctx, make([]uint64, 4)); n != 0 || !errors.Is(err, fallback.ErrNoRegistry) {
				t.Fatalf("round %d: NextIDs on an empty namespace: %d, %v; want ErrNoRegistry", round, n, err)
			}
			noKeys(ctx, t, rdb, "a counter on an empty namespace")
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// flaked init's registry ends the refusal.
		initRegistry(t, rdb, "flaked", flake.DefaultLayout())
		if _, err := bareCounter(t, rdb, fallback.Options{}).NextID(ctx); err != nil {
			t.Fatalf("after the registry was made: %v", err)
		}
	})
}

// Fault: Redis lost everything under a lease owner of layout X (machine
// ID 16383, a grant 3 s ahead), and a counter-mode node with another
// layout Y fetches first. Y's counter machine ID has the low 14 bits of
// X's machine ID 16383, so Y's counter IDs can equal IDs the owner still
// issues within its grant. Guard: the counter never ran under the
// registry, so it is refused (ErrNoRegistry) and stores no layout; the
// owner's renewal restores X, and Y is refused as a layout mismatch from
// then on. A duplicate shows as Y's counter issuing an ID, or as the
// owner losing its layout to Y.
func TestGuard_CounterOtherLayoutAfterTotalLoss_OwnerWins(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		x := flake.DefaultLayout() // seq 8, machine 16
		y := layout(t, 10, 14, 10*time.Millisecond, flake.DefaultStartTime)
		if err := redistest.InitRegistry(ctx, rdb, "flaked", x.String()); err != nil {
			t.Fatal(err)
		}
		reg, err := coord.NewRegistry(rdb, coord.Options{Layout: x, Horizon: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		prev := &statefile.State{Namespace: "flaked", Layout: x.String(), MachineIDs: []int{16383}, Reservation: -1, Token: "old"}
		a, err := reg.Claim(ctx, coord.ClaimOptions{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		now, _ := rdb.Time(ctx).Result()
		grant, err := a.Reserve(ctx, x.Tick(now)+300) // 3 s ahead, within the 4 s horizon
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c := bareCounter(t, rdb, fallback.Options{Layout: y})
		if id, err := c.NextID(ctx); err == nil {
			t.Fatalf("the counter of layout %v issued %d (%+v under the fleet's layout; the owner's grant reaches %d)", y, id, x.Decompose(id), grant)
		} else if !errors.Is(err, fallback.ErrNoRegistry) {
			t.Fatalf("the counter of layout %v on the emptied Redis: %v, want ErrNoRegistry", y, err)
		}
		noKeys(ctx, t, rdb, "the counter of another layout after the loss")
		// The lease is gone with the rest (the renewal reports it lost,
		// and the node claims again above its grant), but the renewal
		// restores the registry first.
		if err := a.Renew(ctx); errors.Is(err, coord.ErrLayoutMismatch) || errors.Is(err, coord.ErrNoRegistry) {
			t.Fatalf("the owner's renewal after the loss: %v", err)
		}
		if l := rdb.Get(ctx, "{flaked}:layout").Val(); l != x.String() {
			t.Fatalf("after the owner's renewal the fleet layout is %q, want %q", l, x.String())
		}
		if err := c.CheckLayout(ctx); !errors.Is(err, fallback.ErrLayoutMismatch) {
			t.Fatalf("CheckLayout of layout %v after the owner restored %v: %v, want ErrLayoutMismatch", y, x, err)
		}
		if id, err := c.NextID(ctx); !errors.Is(err, fallback.ErrLayoutMismatch) {
			t.Fatalf("the counter of layout %v after the owner restored %v: %d, %v; want ErrLayoutMismatch", y, x, id, err)
		}
	})
}
