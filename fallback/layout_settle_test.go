package fallback_test

import (
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
)

// After Redis lost everything, a counter-mode node with another layout Y
// fetches first: counter.lua stores Y but hands nothing out while it
// settles, an owner from before the loss (layout X) renews meanwhile and
// restores X, and the counter is refused without issuing. Without the
// settling, the counter's IDs could equal IDs the owner may still issue
// within its grant (X machine ID 16383 has the low 14 bits of Y's counter
// machine ID), and the owner would be refused instead.
func TestGuard_CounterOtherLayoutAfterTotalLoss_OwnerWins(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		x := flake.DefaultLayout() // seq 8, machine 16
		y := layout(t, 10, 14, 10*time.Millisecond, flake.DefaultStartTime)
		reg, err := coord.NewRegistry(rdb, coord.Options{Layout: x, Horizon: 4 * time.Second, LayoutSettle: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		// A registry that has run for a while under this server.
		if err := redistest.ForgetLoss(ctx, rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		prev := &coord.State{Namespace: "flaked", Layout: x.String(), MachineIDs: []int{16383}, Reservation: -1, Token: "old"}
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
		c := newCounter(t, rdb, fallback.Options{Layout: y, LayoutSettle: 2 * time.Second})
		type result struct {
			id  uint64
			err error
		}
		got := make(chan result, 1)
		go func() {
			id, err := c.NextID(ctx)
			got <- result{id, err}
		}()
		for rdb.Get(ctx, "{flaked}:layout").Val() != y.String() {
			time.Sleep(5 * time.Millisecond) // the counter stored Y and settles
		}
		err = a.Renew(ctx)
		if l := rdb.Get(ctx, "{flaked}:layout").Val(); l != x.String() || errors.Is(err, coord.ErrLayoutMismatch) {
			t.Errorf("after the owner's renewal the fleet layout is %q (renewal: %v): the counter with layout %v took the fleet over", l, err, y)
		}
		r := <-got
		if r.err == nil {
			p := x.Decompose(r.id)
			t.Fatalf("the counter with layout %v issued %d (%+v under the fleet's layout; the owner's grant reaches %d)", y, r.id, p, grant)
		}
		if !strings.Contains(r.err.Error(), "layout") {
			t.Fatalf("the counter with another layout failed with %v, want a layout error", r.err)
		}
	})
}

// Fault: Redis lost everything twice, and a counter-mode node with another
// layout Y made the registry anew both times. The owners from before the
// first loss restored their layout X (as above) and claimed again, in the
// registry the counter made. Were the counter to make the second registry
// with the same generation, those owners would look as if they had joined
// it after Y was stored, not from before, and would lose their layout to
// Y's (renew.lua): X and Y IDs side by side. Guard: every registry the
// counter makes has a generation of its own. Found by the simulator.
func TestGuard_CounterRemakesRegistry_NewGenerationEachTime(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		c := newCounter(t, rdb, fallback.Options{LayoutSettle: time.Millisecond})
		var gens []string
		for range 2 {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.NextID(ctx); err != nil {
				t.Fatal(err)
			}
			gens = append(gens, rdb.HGet(ctx, "{flaked}:meta", "generation").Val())
		}
		if gens[0] == "" || gens[0] == gens[1] {
			t.Fatalf("generations of the two registries the counter made: %q; want two different ones", gens)
		}
	})
}
