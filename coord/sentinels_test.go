package coord_test

import (
	"errors"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// Fault covered: the replica Sentinel may promote is away (paused: it
// neither acknowledges nor answers) while the master and its Sentinel are
// fine. Every grant the master makes while the Sentinel reports it up is
// made before any promotion could come, so a promoted replica's loss floor
// covers it, replicated or not: renewals and claims go on through the
// Sentinel rule. The same registry without Sentinels refuses them (the
// replicas' WAIT), which shows the test reaches the rule it is about.
func TestSentinels_ReplicaAway_GrantsGoOn(t *testing.T) {
	s := redistest.StartSentinel(t)
	rdb := s.Client(t)
	set, err := coord.NewSentinels("redis-sentinel://" + s.SentinelAddrs()[0] + "/" + s.MasterName())
	if err != nil || set == nil {
		t.Fatalf("NewSentinels: %v %v", set, err)
	}
	t.Cleanup(func() { _ = set.Close() })

	views := set.Views(ctxT(t))
	if len(views) != 1 || views[0].Err != nil || views[0].Flags != "master" || views[0].RunID == "" ||
		views[0].MasterAddr != s.Master().Addr() || views[0].DownAfter != time.Second || views[0].Known != 1 {
		t.Fatalf("views: %+v", views)
	}

	reg := newReg(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond, Sentinels: set})
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	without, err := coord.NewRegistry(rdb, coord.Options{ReplicaWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other, err := without.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}

	s.Replica().Pause()
	t.Cleanup(s.Replica().Resume)
	if err := other.Renew(ctxT(t)); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("without Sentinels, a renewal no replica acknowledged: %v", err)
	}
	// Down-after is 1 s and the Sentinel PINGs once a second, so a check
	// now and then finds its last reply too old to vouch for anything:
	// such a grant falls back to the WAIT and is refused; the next check
	// vouches again.
	renewed := 0
	for i := 0; i < 20 && renewed < 5; i++ {
		err := lease.Renew(ctxT(t))
		switch {
		case err == nil:
			renewed++
		case !errors.Is(err, coord.ErrNotReplicated):
			t.Fatalf("renewal through the Sentinel rule: %v", err)
		}
	}
	if renewed < 5 {
		t.Fatalf("%d of 20 renewals through the Sentinel rule went through", renewed)
	}
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
		t.Fatalf("a claim with the replica away: %v", err)
	}
	if st := reg.ReplicaStatus(); st == nil || st.Via != "sentinels" {
		t.Fatalf("ReplicaStatus: %+v", st)
	}
}
