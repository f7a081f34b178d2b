package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/faultproxy"
)

// Replica faults: a master with two replicas and three Sentinels (quorum
// 2, down-after 500 ms), nodes reaching it through the Sentinels, one
// daemon per mode under load. One replica's trouble (away, a full
// resync, lagging), a failover with the old master still reached by some
// nodes or dead, a node started while a replica is away. Every ID is checked for
// duplicates, and the longest stretch without an ID per daemon is held to
// gapTarget: a replica's trouble is not the fleet's outage.
//
// Faults shorter than the reach (--reserve-ahead, 12 s) are ridden out
// from what each node holds, acknowledged before the fault; longer ones,
// and a node that starts while a replica is away (its first claim or
// segment is not acknowledged), need grants used whatever the replicas
// acknowledged when every Sentinel says the master is up (the Sentinel
// rule, internal/replwait). A replica away or behind lasts 15 s, past the
// reach, so the short run needs the rule too; --long
// (FLAKED_FLEET_LONG=1) runs a host's reboot and more (60 s).

// gapTarget is the longest a daemon of any mode may go without an ID
// through a replica fault.
const gapTarget = time.Second

// startTarget is the longest from a daemon's launch to its first ID:
// process start, connections, flaked doctor's checks at start, the claim.
const startTarget = 5 * time.Second

// checkGaps fails for every daemon that went longer than gapTarget
// without an ID.
func checkGaps(t *testing.T, what string, g map[string]time.Duration) {
	t.Helper()
	for name, d := range g {
		if d > gapTarget {
			t.Errorf("%s: %s went %v without an ID; want at most %v", what, name, d.Round(time.Millisecond), gapTarget)
		}
	}
}

// replicaFleet is a replica set with one daemon per mode on it, under
// load, after a warm-up.
func replicaFleet(t *testing.T) (*replicaSet, *modeFleet) {
	t.Helper()
	rs := startReplicaSet(t, 2)
	rs.initRegistry(t)
	f := startModeFleet(t, rs.url(), fleetModes)
	time.Sleep(3 * time.Second)
	rs.checkLinks(t)
	return rs, f
}

// within is d in the short run and long with --long.
func within(d, longD time.Duration) time.Duration {
	if long {
		return longD
	}
	return d
}

// Fault: one replica unreachable (its host rebooting: its link held), 15 s
// (60 s with --long), the fleet under load. No WAIT for both replicas
// succeeds meanwhile; the nodes issue on from what was acknowledged
// before, and from grants the Sentinels vouch for.
func TestReplicaFault_OneAway(t *testing.T) {
	away := within(15*time.Second, 60*time.Second)
	rs, f := replicaFleet(t)
	from := time.Now()
	rs.links[0].Blackhole()
	time.Sleep(time.Second)
	replicaBehind(t, rs, "away")
	time.Sleep(away - time.Second)
	rs.links[0].Heal()
	rs.waitReplicas(t, rs.master, 2)
	time.Sleep(3 * time.Second)
	to := time.Now()
	rs.checkLinks(t)
	f.stop(t)
	checkGaps(t, "one replica away", f.report(t, "one replica away "+away.String(), from, to))
}

// Fault: one replica syncs from scratch (restarted without its data): the
// master lists it, in a full sync, before it can acknowledge (its first
// ACK comes up to a second after the sync). --long does it three times.
func TestReplicaFault_FullResync(t *testing.T) {
	rs, f := replicaFleet(t)
	syncs := fullSyncs(t, rs.master)
	from := time.Now()
	for i := range repeats() {
		rs.resync(t, i%2)
		rs.waitReplicas(t, rs.master, 2)
		time.Sleep(2 * time.Second)
	}
	if got := fullSyncs(t, rs.master) - syncs; got < repeats() {
		t.Errorf("%d full syncs for %d replicas restarted without their data", got, repeats())
	}
	time.Sleep(time.Second)
	to := time.Now()
	f.stop(t)
	checkGaps(t, "a full resync", f.report(t, "a full resync of one replica", from, to))
}

// Fault: one replica's link 300 ms behind (another region, a slow disk),
// 15 s (60 s with --long): a WAIT for both replicas shorter than the lag
// times out, which shows the fault is there; the grants go on (the
// Sentinels vouch for them, and --replica-wait, 1 s, outlasts the lag).
func TestReplicaFault_Lagging(t *testing.T) {
	lag := within(15*time.Second, 60*time.Second)
	rs, f := replicaFleet(t)
	from := time.Now()
	rs.links[0].SetDelay(300 * time.Millisecond)
	time.Sleep(time.Second)
	replicaBehind(t, rs, "300 ms behind")
	time.Sleep(lag - time.Second)
	rs.links[0].SetDelay(0)
	time.Sleep(3 * time.Second)
	to := time.Now()
	rs.checkLinks(t)
	f.stop(t)
	checkGaps(t, "one replica lagging", f.report(t, "one replica 300 ms behind for "+lag.String(), from, to))
}

// Fault: the master cut off from its replicas and the Sentinels but still
// reached by some nodes (each through a proxy of its own, as through a
// VIP that has not moved yet), 5 s (10 s with --long); the Sentinels
// promote a replica and the other nodes follow them to it. Then the cut
// heals: the Sentinels make the old master a replica of the new one (a
// full resync) and its nodes move over too. Two masters accept writes
// meanwhile: every ID of both sides is checked. Each side rides the
// split out from what it holds (within the reach), the nodes on the new
// master across its possible loss of writes (they drain what they held).
func TestReplicaFault_FailoverOldMasterStillReached(t *testing.T) {
	split := within(5*time.Second, 10*time.Second)
	rs, f := replicaFleet(t)
	var old []*faultproxy.Proxy
	for _, mode := range fleetModes {
		p := faultproxy.Start(t, rs.master.Addr())
		old = append(old, p)
		f.add(t, "old-"+mode, "redis://"+p.Addr(), mode)
	}
	time.Sleep(3 * time.Second)
	from := time.Now()
	rs.partition()
	next := rs.waitPromoted(t, 20*time.Second)
	t.Logf("%s promoted %v after the cut", next, time.Since(from).Round(time.Millisecond))
	time.Sleep(max(0, split-time.Since(from)))
	rs.heal()
	for _, p := range old {
		p.Redirect(next)
	}
	time.Sleep(3 * time.Second)
	to := time.Now()
	f.stop(t)
	checkGaps(t, "a failover with the old master still reached", f.report(t, "a failover, the old master reached "+split.String(), from, to))
}

// Fault: the master's host lost (killed, never back): the Sentinels
// promote a replica and keep the dead master on their list of replicas
// (until SENTINEL RESET), so a grant they do not vouch for waits for two
// replicas where the new master has one; 15 s after the promotion (60 s
// with --long), past the reach, the fleet runs on grants they vouch for.
// Every ID is checked: the old master's last grants and the new one's.
func TestReplicaFault_FailoverOldMasterDead(t *testing.T) {
	after := within(15*time.Second, 60*time.Second)
	rs, f := replicaFleet(t)
	from := time.Now()
	rs.master.Kill()
	next := rs.waitPromoted(t, 20*time.Second)
	t.Logf("%s promoted %v after the kill", next, time.Since(from).Round(time.Millisecond))
	time.Sleep(after)
	to := time.Now()
	f.stop(t)
	checkGaps(t, "a failover, the old master dead", f.report(t, "a failover, the old master dead "+after.String(), from, to))
}

// Fault: a node of each mode started while one replica is away (8 s, 30 s
// with --long), 1 s into it. Its first claim or counter segment is not
// acknowledged: the Sentinels vouch for it, so each starts as it would
// with every replica there. The running nodes ride the fault out as in
// TestReplicaFault_OneAway.
func TestReplicaFault_NewNodeWhileReplicaAway(t *testing.T) {
	away := within(8*time.Second, 30*time.Second)
	rs, f := replicaFleet(t)
	running := len(f.members)
	from := time.Now()
	rs.links[0].Blackhole()
	time.Sleep(time.Second)
	started := time.Now()
	for _, mode := range fleetModes {
		f.launch(t, "new-"+mode, rs.url(), mode)
	}
	time.Sleep(away - time.Second)
	rs.links[0].Heal()
	rs.waitReplicas(t, rs.master, 2)
	time.Sleep(3 * time.Second)
	to := time.Now()
	f.stop(t)
	g := f.report(t, "a replica away "+away.String(), from, to)
	fresh := map[string]time.Duration{}
	for _, m := range f.members[running:] {
		fresh[m.d.Name] = m.probe.gap(started, to)
		delete(g, m.d.Name)
		if !strings.Contains(m.d.Log(), `"message":"flaked serving"`) {
			t.Logf("%s did not start: %s", m.d.Name, lastLine(m.d.Log()))
		}
	}
	checkGaps(t, "running nodes", g)
	// A new node's first ID comes after its process starts, connects and
	// runs flaked doctor's checks: its start, not a gap, is what is held.
	for name, d := range fresh {
		if d > startTarget {
			t.Errorf("%s started while a replica is away served its first ID %v after its launch; want at most %v", name, d.Round(time.Millisecond), startTarget)
		}
	}
}

// lastLine is the last non-empty line of a log.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// replicaBehind fails the test unless a write on the master is not
// acknowledged by both replicas within 100 ms: the fault reached a
// replica (the grants themselves no longer show it when the Sentinels
// vouch for them).
func replicaBehind(t *testing.T, rs *replicaSet, what string) {
	t.Helper()
	conn := rs.master.Client(t).Conn()
	defer conn.Close()
	if err := conn.Set(ctxT(t), "fault-probe", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Wait(ctxT(t), 2, 100*time.Millisecond).Result(); err != nil || n >= 2 {
		t.Errorf("WAIT 2 100 with a replica %s: %d, %v: the fault did not reach the replica", what, n, err)
	}
}
