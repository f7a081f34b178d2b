package coord_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
)

func TestRenewInterval_CappedWhateverTheTTL(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{0, coord.MaxRenewInterval},
		{3 * time.Second, time.Second},
		{time.Minute, coord.MaxRenewInterval},
		{coord.MaxLeaseTTL, coord.MaxRenewInterval},
	} {
		if got := (coord.Options{LeaseTTL: c.ttl}).RenewInterval(); got != c.want {
			t.Errorf("RenewInterval with lease TTL %v = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// Fault: Redis lost everything while an owner with layout X and a long
// lease TTL (60 s) runs, and a node with another layout Y, also with a
// 60 s TTL, claims first. Guard: the layout settle window no longer grows
// with the TTL (RenewInterval + 1 s = 3 s instead of 21 s), which is sound
// only because owners renew at least every MaxRenewInterval whatever
// their TTL: X's keep-alive restores X within Y's window, and Y's claim
// fails with ErrLayoutMismatch. A duplicate shows as Y getting a lease
// (IDs of two layouts side by side): with X renewing every TTL/3 = 20 s,
// Y's 3 s window would close before X came by.
func TestGuard_TotalLoss_LongTTL_OwnerRenewsWithinShortSettle(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		x, y := flake.DefaultLayout(), otherLayout(t)
		regX := newGuardReg(t, rdb, coord.Options{Layout: x, LeaseTTL: time.Minute})
		regY := newReg(t, rdb, coord.Options{Layout: y, LeaseTTL: time.Minute, MaxWait: time.Minute})
		if got, want := regY.Options().LayoutSettle, coord.MaxRenewInterval+time.Second; got != want {
			t.Fatalf("layout settle with a 60 s lease TTL = %v, want %v", got, want)
		}
		a, err := regX.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a.KeepAlive()
		t.Cleanup(a.Abandon)
		if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		lease, err := regY.Claim(ctxT(t), coord.ClaimOptions{})
		if lease != nil || !errors.Is(err, coord.ErrLayoutMismatch) {
			t.Fatalf("Y's claim: lease %v, err %v; want ErrLayoutMismatch and no lease", lease, err)
		}
		if got := rdb.Get(ctxT(t), "{flaked}:layout").Val(); got != x.String() {
			t.Fatalf("layout = %q, want X's %q restored by its keep-alive", got, x.String())
		}
		findEvent(t, rdb, "layout_restored", map[string]string{"layout": x.String(), "token": a.Token()})
	})
}
