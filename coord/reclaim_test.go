package coord_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// Fault: an owner pauses past its lease's TTL (a GC pause, a stopped VM);
// its lease expires, another node claims the machine ID, issues above the
// owner's reservation and then stops without a release (crash); the owner
// resumes. Guard: renew.lua never re-asserts a missing lease: the owner's
// renewal loses it ("expired"), and the owner claims again with its
// preferred ID, which claim.lua floors at the reservation in Redis (the
// other node's grant), not only at the owner's state file. A duplicate
// shows as the owner's renewal succeeding, or its new claim starting
// below the other node's grant (both would issue the same ticks).
func TestGuard_PausedPastLease_ReclaimAboveOther(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t) // one leasable machine ID: the other node must take the owner's
		o := coord.Options{Layout: l, Horizon: 3 * time.Second}
		o.Owner = coord.Owner{Host: "owner"}
		regA := newGuardReg(t, rdb, o)
		o.Owner = coord.Owner{Host: "other"}
		regB := newGuardReg(t, rdb, o)
		if err := redistest.ForgetLoss(ctxT(t), rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "node.state")
		sfA, prevA := openState(t, path)
		a, err := regA.Claim(ctxT(t), coord.ClaimOptions{State: sfA, Previous: prevA})
		if err != nil {
			t.Fatal(err)
		}
		id := a.MachineIDs()[0]
		grantA, err := a.Reserve(ctxT(t), redisNowTick(t, rdb, l)+50)
		if err != nil {
			t.Fatal(err)
		}
		leaseKey := "{flaked}:lease:" + strconv.Itoa(id)
		if err := rdb.Del(ctxT(t), leaseKey).Err(); err != nil { // the TTL ran out during the pause
			t.Fatal(err)
		}
		// The owner resumes before anyone else claimed: still lost.
		if err := a.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("renewal of an expired lease: %v, want ErrLeaseLost (expired)", err)
		}
		if n := rdb.Exists(ctxT(t), leaseKey).Val(); n != 0 {
			t.Fatal("the expired lease was re-asserted")
		}
		_ = a.Release(ctxT(t), grantA)
		sfA.Close()

		b, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil || b.MachineIDs()[0] != id {
			t.Fatalf("the other node's claim: %v, %v; want machine ID %d", b, err, id)
		}
		if b.Floor() < grantA {
			t.Fatalf("the other node starts after %d, below the owner's grant %d", b.Floor(), grantA)
		}
		grantB, err := b.Reserve(ctxT(t), redisNowTick(t, rdb, l)+200)
		if err != nil || grantB <= grantA {
			t.Fatalf("the other node's Reserve = %d, %v; want above %d", grantB, err, grantA)
		}
		b.Abandon() // crashes: no release
		if err := rdb.Del(ctxT(t), leaseKey).Err(); err != nil {
			t.Fatal(err)
		}

		sfA2, prevA2 := openState(t, path)
		a2, err := regA.Claim(ctxT(t), coord.ClaimOptions{State: sfA2, Previous: prevA2})
		if err != nil || a2.MachineIDs()[0] != id {
			t.Fatalf("the owner's new claim: %v, %v; want its preferred machine ID %d", a2, err, id)
		}
		if a2.Floor() < grantB {
			t.Fatalf("the owner claims again after tick %d, below the other node's grant %d: duplicate ticks", a2.Floor(), grantB)
		}
	})
}
