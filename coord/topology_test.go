package coord_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/redisurl"
)

// TestCluster_ThreeMasters_ScriptsRunUnchanged claims, renews, checks and
// releases through a redis-cluster:// URL on a three-master cluster.
func TestCluster_ThreeMasters_ScriptsRunUnchanged(t *testing.T) {
	redistest.Require(t)
	c := redistest.StartCluster(t, 3)
	rdb, err := redisurl.NewClient("redis-cluster://" + strings.Join(c.Addrs(), ","))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	var leases []*coord.Lease
	var ids []int
	for _, ns := range []string{"alpha", "beta", "alpha", "alpha"} {
		reg := newReg(t, rdb, coord.Options{Namespace: ns})
		l, err := reg.Claim(ctxT(t), coord.ClaimOptions{Count: 2})
		if err != nil {
			t.Fatalf("claim on cluster (%s): %v", ns, err)
		}
		if ns == "alpha" {
			ids = append(ids, l.MachineIDs()...)
		}
		now := flake.DefaultLayout().Tick(time.Now())
		if got, err := l.Reserve(ctxT(t), now+100); err != nil || got < now+100 {
			t.Fatalf("reserve on cluster: %d, %v", got, err)
		}
		if ok, err := l.Check(ctxT(t)); !ok || err != nil {
			t.Fatalf("check on cluster: %v %v", ok, err)
		}
		leases = append(leases, l)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 6 {
		t.Fatalf("three alpha leases of 2 IDs got %v", ids)
	}
	for _, l := range leases {
		if err := l.Release(ctxT(t), l.Floor()); err != nil {
			t.Fatalf("release on cluster: %v", err)
		}
	}
	other, _ := flake.NewLayout(9, 15, 0, time.Time{})
	if _, err := newReg(t, rdb, coord.Options{Namespace: "alpha", Layout: other}).Claim(ctxT(t), coord.ClaimOptions{}); err == nil {
		t.Fatal("layout mismatch not refused on cluster")
	}
}

// TestSentinel_Failover_ClaimsAgainAboveTheLoss: a failover is a possible
// loss of writes (the promoted replica may have missed a takeover of this
// very lease), so a lease taken through Sentinel is not extended across it:
// the holder's next reservation reports the loss, and the claim it makes
// then (through the new master) starts above everything granted before.
func TestSentinel_Failover_ClaimsAgainAboveTheLoss(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	rdb, err := redisurl.NewClient("redis-sentinel://" + s.SentinelAddrs()[0] + "/" + s.MasterName())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	l, err := flake.NewLayout(8, 2, 0, time.Time{}) // IDs 0..2 leasable
	if err != nil {
		t.Fatal(err)
	}
	// A failover is a possible loss: claims after it wait for the loss floor.
	reg := newReg(t, rdb, coord.Options{Layout: l, MaxWait: time.Minute})
	a, err := reg.Claim(ctxT(t), coord.ClaimOptions{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	now := l.Tick(time.Now())
	granted, err := a.Reserve(ctxT(t), now+100)
	if err != nil {
		t.Fatal(err)
	}
	s.Failover(t)
	// go-redis follows the new master; the first commands may hit the old
	// connection, so allow a few tries within the lease TTL.
	var renewErr error
	for range 50 {
		if _, renewErr = a.Reserve(ctxT(t), now+200); errors.Is(renewErr, coord.ErrLeaseLost) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(renewErr, coord.ErrLeaseLost) || !strings.Contains(renewErr.Error(), "lost writes") {
		t.Fatalf("reservation after failover: %v; want the lease lost to a possible loss", renewErr)
	}
	// What a node does with a lost lease: give it back (the scripts check
	// the token), recording the last tick it used, then claim again.
	if err := a.Release(ctxT(t), granted); err != nil {
		t.Fatal(err)
	}
	b, err := reg.Claim(ctxT(t), coord.ClaimOptions{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if b.Floor() < granted {
		t.Fatalf("claim after failover starts after tick %d, below %d granted before it", b.Floor(), granted)
	}
	if got, _ := rdb.HGet(ctxT(t), "{flaked}:reserved", strconv.Itoa(b.MachineIDs()[0])).Int64(); got < granted {
		t.Fatalf("reservation after failover %d < %d", got, granted)
	}
}
