package coord_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/faultproxy"
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

// Fault covered: a replica the Sentinels may promote that the fleet's
// mark does not count (here the mark is set to one with a replica away);
// a grant then acknowledged by the other alone is missing from it, which
// the Sentinels may promote while the old master still grants, and the
// promoted one's nodes hand out the same values (the SPIN model's
// teeth-sentinel-replicas-ignored, docs/model.md). Through Sentinel a
// grant the Sentinels do not vouch for (here: one of three is down, then
// all) waits for every replica they know, so it is refused while one is
// away, whatever the mark; with both back it is used again.
func TestSentinels_UnvouchedGrantWaitsForEveryKnownReplica(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	master := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}})
	var links []*faultproxy.Proxy
	for range 2 {
		link := faultproxy.Start(t, master.Addr())
		redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0",
			"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
		links = append(links, link)
	}
	rdb := master.Client(t)
	waitOnline(t, rdb, 2)
	// A long down-after: no Sentinel fails the master over while the
	// test cuts a replica's link on a loaded machine.
	sents := redistest.StartSentinels(t, master.Addr(), 2, redistest.SentinelsOptions{DownAfter: 30 * time.Second})
	set, err := coord.NewSentinels(sents.URL())
	if err != nil || set == nil {
		t.Fatalf("NewSentinels: %v %v", set, err)
	}
	t.Cleanup(func() { _ = set.Close() })
	for _, v := range set.Views(ctxT(t)) {
		if v.Err != nil || v.Replicas != 2 {
			t.Fatalf("a Sentinel's view: %+v; want 2 replicas known", v)
		}
	}

	reg := newReg(t, rdb, coord.Options{ReplicaWait: 200 * time.Millisecond, MinReplicas: 1, Sentinels: set})
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Replica 1 away, and the mark one: an operator's --set 1 for its
	// planned restart, which also counts the replicas listed anew.
	links[1].Cut()
	waitOnline(t, rdb, 1)
	if _, err := coord.SetReplicaMark(ctxT(t), rdb, "", 1, "test"); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctxT(t)); err != nil {
		t.Fatalf("a renewal the Sentinels vouch for, replica 1 away: %v", err)
	}
	sents.Servers()[2].Stop()
	err = lease.Renew(ctxT(t))
	if !errors.Is(err, coord.ErrNotReplicated) || !strings.Contains(err.Error(), "the Sentinels know 2 replicas") ||
		!strings.Contains(err.Error(), "SENTINEL RESET") {
		t.Fatalf("a renewal the Sentinels do not vouch for, acknowledged by 1 of the 2 replicas they know: %v", err)
	}
	if st := reg.ReplicaStatus(); st == nil || st.Need != 2 || st.Known != 2 || st.Acked != 1 {
		t.Fatalf("ReplicaStatus: %+v", st)
	}
	// No Sentinel answers: the last count any gave stands.
	sents.Servers()[0].Stop()
	sents.Servers()[1].Stop()
	if err := lease.Renew(ctxT(t)); !errors.Is(err, coord.ErrNotReplicated) || !strings.Contains(err.Error(), "the Sentinels know 2 replicas") {
		t.Fatalf("a renewal with no Sentinel answering: %v", err)
	}
	links[1].Heal()
	waitOnline(t, rdb, 2)
	if err := lease.Renew(ctxT(t)); err != nil {
		t.Fatalf("both replicas back: %v", err)
	}
}
