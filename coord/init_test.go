package coord_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

// flaked init on an empty Redis records a possible loss and returns once
// Redis grants past it, so the first claim after it is granted the tick
// after its floor at once; a second init, or one over a registry a node
// restored, is refused: init can never lower the floors of a fleet that
// has issued IDs. A duplicate would need init to succeed over an existing
// registry (resetting loss_ms) or the first claim after init to start
// below the loss floor, which it checks.
func TestInit_FirstClaimGrantedAtOnce_SecondRefused(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		o := coord.Options{LeaseTTL: time.Minute, Horizon: 100 * time.Millisecond}
		if _, err := coord.Init(ctxT(t), rdb, o); err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(ctxT(t), "{flaked}:layout").Val(); got != flake.DefaultLayout().String() {
			t.Fatalf("layout after init = %q", got)
		}
		if loss := rdb.HGet(ctxT(t), "{flaked}:meta", contract.MetaLossMs).Val(); loss == "" || loss == "0" {
			t.Fatalf("init recorded no loss (loss_ms %q): a registry made after Redis lost everything would start below the grants made before", loss)
		}
		reg, err := coord.NewRegistry(rdb, o)
		if err != nil {
			t.Fatal(err)
		}
		l, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatalf("the first claim after init: %v", err)
		}
		lay := flake.DefaultLayout()
		loss, _ := rdb.HGet(ctxT(t), "{flaked}:meta", contract.MetaLossMs).Int64()
		if lossFloor := lay.Tick(time.UnixMilli(loss).Add(contract.RedisSkew)) + 10; l.Floor() < lossFloor {
			t.Fatalf("the first claim after init starts after tick %d, below the loss floor %d", l.Floor(), lossFloor)
		}
		if got, err := l.Reserve(ctxT(t), l.Floor()+5); err != nil || got <= l.Floor() {
			t.Fatalf("the first claim after init: granted %d (%v), want past its floor %d at once", got, err, l.Floor())
		}
		if _, err := coord.Init(ctxT(t), rdb, o); !errors.Is(err, coord.ErrRegistryExists) {
			t.Fatalf("a second init: %v, want ErrRegistryExists", err)
		}
		// A registry an owner restored after Redis lost everything is
		// refused too.
		if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("renewal after FLUSHALL: %v, want ErrLeaseLost", err)
		}
		if _, err := coord.Init(ctxT(t), rdb, o); !errors.Is(err, coord.ErrRegistryExists) {
			t.Fatalf("init over a registry an owner restored: %v, want ErrRegistryExists", err)
		}
	})
}

// Fault: Redis loses everything while a node of the fleet still issues
// under a reservation ahead of its clock (cut off, paused), and an
// operator runs flaked init at once, taking the namespace for new. Guard:
// init records a loss at its time, as a restore does, so a claim after it
// starts above every tick granted before (loss + skew + horizon). A
// duplicate shows as the new node's floor at or below the old grant on
// the same (only) machine ID.
func TestInit_RightAfterTotalLoss_ClaimAboveOldGrant(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		o := coord.Options{Layout: l, Horizon: time.Second, MaxWait: time.Minute}
		old := newReg(t, rdb, o)
		a, err := old.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		grant, err := a.Reserve(ctxT(t), redisNowTick(t, rdb, l)+90) // 0.9 s ahead, within the horizon
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := coord.Init(ctxT(t), rdb, o); err != nil {
			t.Fatal(err)
		}
		reg, err := coord.NewRegistry(rdb, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.MachineIDs()[0] == a.MachineIDs()[0] && b.Floor() < grant {
			t.Fatalf("after init, machine ID %d is claimed from tick %d, below the grant %d the old owner still issues under",
				b.MachineIDs()[0], b.Floor()+1, grant)
		}
	})
}

// A node that never ran under the namespace's registry is refused on an
// empty namespace, with the fix named, in flake and counter mode alike
// (fallback's tests), and leaves no key behind.
func TestClaim_NoRegistry_RefusedNamingInit(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		reg, err := coord.NewRegistry(rdb, coord.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = reg.Claim(ctxT(t), coord.ClaimOptions{})
		if !errors.Is(err, coord.ErrNoRegistry) || !strings.Contains(err.Error(), "flaked init") {
			t.Fatalf("claim on an empty namespace: %v, want ErrNoRegistry naming flaked init", err)
		}
		if keys := rdb.Keys(ctxT(t), "*").Val(); len(keys) != 0 {
			t.Fatalf("a refused claim left keys: %v", keys)
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
	o := coord.Options{MaxWait: time.Minute, Horizon: time.Second}
	if _, err := coord.Init(ctxT(t), rdb, o); err != nil {
		t.Fatal(err)
	}
	reg := newGuardReg(t, rdb, o)
	a, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now, _ := rdb.Time(ctxT(t)).Result()
	granted, err := a.Reserve(ctxT(t), flake.DefaultLayout().Tick(now)+90)
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
