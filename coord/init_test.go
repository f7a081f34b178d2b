package coord_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

// flaked init on an empty Redis: the first claim starts at once (no loss
// floor, no layout settle window), and a second init, or one over a
// registry a node made, is refused: init can never lower the floors of a
// fleet that has issued IDs. A duplicate would need init to succeed over
// an existing registry (resetting loss_ms) or the first claim after init
// to start below a reservation, which it checks.
func TestInit_NewFleet_FirstClaimAtOnce_SecondRefused(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		o := coord.Options{LeaseTTL: time.Minute, MaxWait: time.Nanosecond} // a claim takes no ID ahead of the clock
		if _, err := coord.Init(ctxT(t), rdb, o); err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(ctxT(t), "{flaked}:layout").Val(); got != flake.DefaultLayout().String() {
			t.Fatalf("layout after init = %q", got)
		}
		reg, err := coord.NewRegistry(rdb, o)
		if err != nil {
			t.Fatal(err)
		}
		l, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatalf("the first claim after init: %v (it must need no loss floor)", err)
		}
		if now := flake.DefaultLayout().Tick(time.Now()); l.Floor() >= now {
			t.Fatalf("the first claim after init starts after tick %d, ahead of the clock %d", l.Floor(), now)
		}
		if w := rdb.HGet(ctxT(t), "{flaked}:meta", contract.MetaLayoutSettleMs).Val(); w != "" {
			t.Fatalf("a settle window was opened after init (until %s)", w)
		}
		if _, err := coord.Init(ctxT(t), rdb, o); !errors.Is(err, coord.ErrRegistryExists) {
			t.Fatalf("a second init: %v, want ErrRegistryExists", err)
		}
		// A registry a node made (no init) is refused too.
		if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := newGuardReg(t, rdb, coord.Options{MaxWait: time.Minute}).Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := coord.Init(ctxT(t), rdb, o); !errors.Is(err, coord.ErrRegistryExists) {
			t.Fatalf("init over a registry a node made: %v, want ErrRegistryExists", err)
		}
	})
}

// Fault: Redis restarts (or fails over) after flaked init, under an owner
// that reserved ahead. Guard: init recorded the server's identity, so
// guard.lua sees the change as for any registry and a claim after it
// starts above the loss floor. A duplicate shows as the later claim
// starting at or below the owner's grant.
func TestInit_RedisRestartAfterInit_LossFloorAsUsual(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{AOF: true})
	rdb := srv.Client(t)
	o := coord.Options{MaxWait: time.Minute}
	if _, err := coord.Init(ctxT(t), rdb, o); err != nil {
		t.Fatal(err)
	}
	reg := newGuardReg(t, rdb, o)
	a, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now, _ := rdb.Time(ctxT(t)).Result()
	granted, err := a.Reserve(ctxT(t), flake.DefaultLayout().Tick(now)+300)
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	b, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Floor() <= granted {
		t.Fatalf("a claim after the restart starts after tick %d, not above the grant %d made before it", b.Floor(), granted)
	}
}
