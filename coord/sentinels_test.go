package coord_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/internal/replwait"
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

	asked := &countedSentinels{Sentinels: set}
	reg := newReg(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond, Sentinels: asked})
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
	// Down-after is 1 s and the Sentinel PINGs once a second, so at the
	// end of each second the check sent with a grant finds its last reply
	// nearly down-after old and vouches for nothing: the Waiter asks again
	// after the grant's reply, and that check vouches. Every renewal goes
	// through; renewals spread over up to 5 s meet such checks (more
	// Views calls than renewals).
	renewals := 0
	asked.calls.Store(0)
	for ; renewals < 100 && asked.calls.Load() < int64(renewals)+3; renewals++ {
		if err := lease.Renew(ctxT(t)); err != nil {
			t.Fatalf("renewal %d through the Sentinel rule, the replica away: %v", renewals, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := asked.calls.Load(); n <= int64(renewals) {
		t.Fatalf("%d renewals over %v asked the Sentinels %d times: no first check left a grant out, so the second check went untested",
			renewals, time.Duration(renewals)*50*time.Millisecond, n)
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

// countedSentinels counts the checks a registry sends.
type countedSentinels struct {
	replwait.Sentinels
	calls atomic.Int64
}

func (c *countedSentinels) Views(ctx context.Context) []replwait.SentinelView {
	c.calls.Add(1)
	return c.Sentinels.Views(ctx)
}
