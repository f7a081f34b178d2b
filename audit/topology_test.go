package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

// auditOver claims two machine IDs through url (one kept, one released),
// then reads, verifies, looks up and prunes through the same URL: every
// command of the audit runs on the topology.
func auditOver(t *testing.T, url string) {
	t.Helper()
	rdb := client(t, url)
	ctx := ctxT(t)
	initFleet(t, rdb, "topo", flake.DefaultLayout())
	reg, err := coord.NewRegistry(rdb, coord.Options{Namespace: "topo", Horizon: time.Millisecond, LeaseTTL: 5 * time.Second,
		Owner: coord.Owner{Host: "topo-host", Addr: "topo:1"}})
	if err != nil {
		t.Fatal(err)
	}
	live, err := reg.Claim(ctx, coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Reserve(ctx, live.Floor()+100); err != nil {
		t.Fatal(err)
	}
	gone, err := reg.Claim(ctx, coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(ctx, gone.Floor()); err != nil {
		t.Fatal(err)
	}
	s, err := audit.Read(ctx, rdb, "topo")
	if err != nil {
		t.Fatal(err)
	}
	rep := audit.Build(s)
	if !rep.Consistent() || row(t, rep, live.MachineIDs()[0]).State != audit.Live ||
		row(t, rep, gone.MachineIDs()[0]).State != audit.Released || !s.Stream.Complete || len(s.Events) != 4 /* init, 2 claims, a release */ {
		t.Fatalf("report %+v, findings %v, %d events, stream %+v, meta %+v", rep.Machines, rep.Findings, len(s.Events), s.Stream, s.Meta)
	}
	id, err := s.Layout.Compose(live.Floor()+1, 0, live.MachineIDs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if w, err := audit.WhoIs(s, id); err != nil || !w.Known || w.Owner.Addr != "topo:1" {
		t.Fatalf("whois: %+v, %v", w, err)
	}
	// The released ID's reservation (its floor: init's loss floor, ahead
	// of the clock) must be older than the cutoff.
	time.Sleep(time.Until(s.Layout.TickTime(gone.Floor() + 1).Add(300 * time.Millisecond)))
	res, err := audit.Prune(ctx, rdb, "topo", audit.PruneOptions{OlderThan: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pruned) != 1 || res.Pruned[0].MachineID != gone.MachineIDs()[0] || len(res.Kept) != 1 {
		t.Fatalf("prune: %+v", res)
	}
	if err := live.Release(ctx, live.Floor()); err != nil {
		t.Fatal(err)
	}
}

func TestTopology_Cluster_AuditWorks(t *testing.T) {
	redistest.Require(t)
	c := redistest.StartCluster(t, 3)
	auditOver(t, "redis-cluster://"+strings.Join(c.Addrs(), ","))
}

func TestTopology_Sentinel_AuditWorks(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	auditOver(t, "redis-sentinel://"+s.SentinelAddrs()[0]+"/"+s.MasterName())
}
