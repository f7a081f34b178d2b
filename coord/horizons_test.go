package coord_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// Nodes configured with different horizons (say --max-lead 4s where the
// fleet was created by nodes with the default 1s). {ns}:meta fixes the
// fleet's horizon when it is made and renew.lua caps every grant at Redis
// TIME + it, so after Redis loses a suffix of writes a default node's claim
// (loss + that horizon) still starts above every tick the large-horizon
// node was granted. Without the cap it started below them.
func TestGuard_MixedHorizons_LossFloorAboveGrants(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		small := newGuardReg(t, rdb, coord.Options{Layout: l, Horizon: time.Second, MaxWait: time.Minute})
		big := newGuardReg(t, rdb, coord.Options{Layout: l, Horizon: 5 * time.Second, MaxWait: time.Minute})
		// The fleet is created by a default node: {ns}:meta horizon = 1 s.
		first, err := small.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctxT(t), first.Floor()); err != nil {
			t.Fatal(err)
		}
		if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		// A node with a 5 s horizon reserves 4.5 s ahead, within it.
		b, err := big.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id := b.MachineIDs()[0]
		now := redisNowTick(t, rdb, l)
		grant, err := b.Reserve(ctxT(t), now+450)
		if err != nil {
			t.Fatal(err)
		}
		claimAboveAfterLoss(t, rdb, small, id, now, grant)
	})
}

// flaked init fixes the fleet's horizon (its --reserve-ahead and the other
// reach flags), not the first node to claim: a node with the fleet's reach
// is granted all of it though a node with a shorter one claimed first, and
// after Redis loses a suffix of writes that short node's claim still
// starts above the long grant (a duplicate shows as its floor below it).
// Were the first claim to fix the horizon, the long-reach nodes of a fleet
// initialised for them would be capped at the first short node's.
func TestInit_FixesTheFleetHorizon(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		long := coord.Options{Layout: l, Horizon: 2 * time.Second, MaxWait: time.Minute}
		if _, _, err := coord.MakeRegistry(ctxT(t), rdb, long); err != nil {
			t.Fatal(err)
		}
		if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		short := newGuardReg(t, rdb, coord.Options{Layout: l, Horizon: 500 * time.Millisecond, MaxWait: time.Minute})
		first, err := short.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctxT(t), first.Floor()); err != nil {
			t.Fatal(err)
		}
		b, err := newGuardReg(t, rdb, long).Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id := b.MachineIDs()[0]
		now := redisNowTick(t, rdb, l)
		grant, err := b.Reserve(ctxT(t), now+180) // 1.8 s ahead, within init's horizon
		if err != nil {
			t.Fatal(err)
		}
		if grant < now+150 {
			t.Fatalf("granted up to tick %d, %d ticks ahead: capped below the horizon flaked init set (200 ticks)", grant, grant-now)
		}
		claimAboveAfterLoss(t, rdb, short, id, now, grant)
	})
}

// claimAboveAfterLoss rolls machine ID id back to before tick now (a
// failover loses its reservation and lease), claims with reg, and fails
// if the claim takes id at or below grant, the long-reach node's: the
// ticks between would be issued twice.
func claimAboveAfterLoss(t *testing.T, rdb redis.UniversalClient, reg *coord.Registry, id int, now, grant int64) {
	t.Helper()
	rollBack(t, rdb, id, now-1)
	c, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.MachineIDs()[0] == id && c.Floor() < grant {
		t.Fatalf("after the loss, the shorter-reach node claims ID %d from tick %d; the longer one was granted up to %d: %d ticks issued twice",
			id, c.Floor()+1, grant, grant-c.Floor())
	}
}
