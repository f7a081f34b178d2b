package coord_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/redisinfo"
	"github.com/flaked/flaked/internal/redistest"
)

// masterWithReplica starts a master and a replica of it whose replication
// link runs through a proxy (cut it to stop the replica acknowledging),
// and waits until the master lists the replica online.
func masterWithReplica(t *testing.T) (master, replica *redistest.Server, link *faultproxy.Proxy) {
	t.Helper()
	redistest.Require(t)
	master = redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}})
	link = faultproxy.Start(t, master.Addr())
	replica = redistest.Start(t, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	waitOnline(t, master.Client(t), 1)
	return master, replica, link
}

// waitOnline waits until rdb's master lists n replicas, all online and
// acknowledging writes: after a full sync the master holds its stream back
// until the replica's first periodic ACK (up to 1 s), so a grant at once
// would be refused.
func waitOnline(t *testing.T, rdb redis.UniversalClient, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := coord.SplitBrainCheck(ctxT(t), rdb, "")
		if err == nil && m.Listed == n && m.Online == n && (n == 0 || ackedWrite(t, rdb, n)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the master does not list %d online replicas: %+v, %v", n, m, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waits is how many WAIT commands the server has run.
func waits(t *testing.T, rdb redis.UniversalClient) int {
	t.Helper()
	info, err := rdb.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats, _ := redisinfo.Field(info, "cmdstat_wait") // calls=N,usec=...
	calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
	n, _ := strconv.Atoi(calls)
	return n
}

// Fault covered: a replica stops acknowledging (cut off, then down for
// good) while the master goes on. A grant the replica does not hold would
// be lost if it were promoted, and a node of the new master could hand out
// the same ticks or counter values: so no such grant is used. Claims,
// reservations and counter segments are refused, the lease keeps what it
// was granted, and all resume when the replica is back or the operator
// lowers the high-water mark.
func TestReplicaWait_ReplicaDown_FailsClosedThenResumes(t *testing.T) {
	master, replica, link := masterWithReplica(t)
	rdb := master.Client(t)
	reg := newReg(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond})
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := coord.SplitBrainCheck(ctxT(t), rdb, ""); err != nil || m.Mark != 1 || m.Problem() != "" {
		t.Fatalf("after a claim with one replica: %+v %q, %v; want mark 1, no problem", m, m.Problem(), err)
	}
	before := waits(t, rdb)
	held, err := lease.Reserve(ctxT(t), lease.Granted()+100)
	if err != nil {
		t.Fatalf("reserve with the replica in sync: %v", err)
	}
	if waits(t, rdb) == before {
		t.Fatal("a reservation with a replica sent no WAIT")
	}
	counter, err := fallback.New(rdb, fallback.Options{ReplicaWait: 100 * time.Millisecond, MinSegment: 10, MaxSegment: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	if _, err := counter.NextID(ctxT(t)); err != nil {
		t.Fatalf("counter with the replica in sync: %v", err)
	}

	refused := func(what string) {
		t.Helper()
		if _, err := lease.Reserve(ctxT(t), held+1000); !errors.Is(err, coord.ErrNotReplicated) ||
			!strings.Contains(err.Error(), "flaked audit replicas --set") {
			t.Fatalf("%s: reserve: %v; want ErrNotReplicated naming the fix", what, err)
		}
		if g := lease.Granted(); g != held {
			t.Fatalf("%s: granted %d after a refused reservation, want %d", what, g, held)
		}
		if err := lease.Renew(ctxT(t)); !errors.Is(err, coord.ErrNotReplicated) {
			t.Fatalf("%s: renew: %v; want ErrNotReplicated", what, err)
		}
		if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
			t.Fatalf("%s: claim: %v; want ErrNotReplicated", what, err)
		}
		// The refused claims were given back: only the lease held is left.
		if leases, err := rdb.Keys(ctxT(t), "{flaked}:lease:*").Result(); err != nil || len(leases) != 1 {
			t.Fatalf("%s: leases %v, %v after refused claims; want only the one held", what, leases, err)
		}
		// Counter mode: what the counter holds (the current segment and a
		// prefetched one, 10 values each at most) is issued, then nothing:
		// the next segment is not acknowledged.
		ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
		defer cancel()
		issued := 0
		for ; issued <= 20; issued++ {
			if _, err = counter.NextID(ctx); err != nil {
				break
			}
		}
		if !errors.Is(err, fallback.ErrUnavailable) {
			t.Fatalf("%s: counter issued %d values, then %v; want ErrUnavailable within 20", what, issued, err)
		}
		if st := counter.Stats(); !errors.Is(st.LastError, fallback.ErrNotReplicated) {
			t.Fatalf("%s: counter's last error %v; want ErrNotReplicated", what, st.LastError)
		}
	}
	resumes := func(what string) {
		t.Helper()
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for {
			var got int64
			if got, err = lease.Reserve(ctxT(t), held+1000); err == nil {
				held = got
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: reserve still refused: %v", what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		for range 20 {
			if _, err := counter.NextID(ctx); err != nil {
				t.Fatalf("%s: counter: %v", what, err)
			}
		}
	}

	link.Cut() // the master still lists the replica (until repl-timeout) but gets no acknowledgement
	refused("replica cut off")
	link.Heal()
	resumes("replica back")

	replica.Kill() // the master lists none now, but has had one
	waitOnline(t, rdb, 0)
	refused("replica down")
	m, err := coord.SplitBrainCheck(ctxT(t), rdb, "")
	if err != nil || m.Mark != 1 || m.Listed != 0 || !strings.Contains(m.Problem(), "--set 0") {
		t.Fatalf("SplitBrainCheck with the replica down: %+v %q, %v", m, m.Problem(), err)
	}
	if prev, err := coord.SetReplicaMark(ctxT(t), rdb, "", 0, "test"); err != nil || prev != 1 {
		t.Fatalf("SetReplicaMark 0: previous %d, %v", prev, err)
	}
	resumes("mark lowered")
	// The first grant after the mark went down may still ask WAIT for the
	// count the previous one needed (and wait the timeout out); none after.
	before = waits(t, rdb)
	resumes("mark lowered, again")
	if n := waits(t, rdb) - before; n != 0 {
		t.Fatalf("%d WAITs with no replica and the mark at 0, want none", n)
	}
	if !hasEvent(t, rdb, "replicas") {
		t.Error("no replicas event for the operator's mark")
	}
}

// With no replica, no WAIT is ever sent: the steady state of a standalone
// Redis costs nothing.
func TestReplicaWait_NoReplica_NoWait(t *testing.T) {
	_, rdb := realRedis(t)
	reg := newReg(t, rdb, coord.Options{})
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := lease.Reserve(ctxT(t), lease.Granted()+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := waits(t, rdb); n != 0 {
		t.Fatalf("%d WAITs without replicas", n)
	}
}

// SetReplicaMark refuses a namespace without a registry: a partial
// {ns}:meta would read as a registry made anew.
func TestSetReplicaMark_NoRegistry(t *testing.T) {
	_, rdb := realRedis(t)
	if _, err := coord.SetReplicaMark(ctxT(t), rdb, "none", 0, "test"); err == nil || !strings.Contains(err.Error(), "no registry") {
		t.Fatalf("SetReplicaMark on an empty namespace: %v", err)
	}
	if n, _ := rdb.Exists(ctxT(t), "{none}:meta").Result(); n != 0 {
		t.Fatal("SetReplicaMark created {none}:meta")
	}
}

// Fault covered: the master restarts (new run_id, data kept) while cut
// off from its replica, which may be promoted meanwhile. The mark stays:
// grants are refused until the replica is back, rather than made on a
// master no replica follows (which a promotion of that replica would
// lose while nodes use them).
func TestReplicaWait_MasterRestartedCutOff_StillRefuses(t *testing.T) {
	redistest.Require(t)
	master := redistest.Start(t, redistest.Options{AOF: true, Args: []string{"repl-diskless-sync-delay 0"}})
	link := faultproxy.Start(t, master.Addr())
	redistest.Start(t, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	rdb := master.Client(t)
	waitOnline(t, rdb, 1)
	reg := newRegKeepLoss(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond, MaxWait: 30 * time.Second})
	if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	link.Cut()
	master.Kill()
	master.Restart(t)
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("claim on the restarted master cut off from its replica: %v; want ErrNotReplicated", err)
	}
	if m, err := coord.SplitBrainCheck(ctxT(t), rdb, ""); err != nil || m.Mark != 1 {
		t.Fatalf("mark after the restart: %+v, %v; want 1", m, err)
	}
	link.Heal()
	waitOnline(t, rdb, 1)
	claimWithin(t, reg, 10*time.Second, "once the replica is back")
}

// Fault covered: the master restarts empty (its disk lost) while cut off
// from its replica, which may be promoted meanwhile. A node that ran
// under the registry restores {ns}:meta with the mark its last grant
// used, not the replicas the empty master lists (none): so the master
// grants nothing no replica holds. With the mark started from the
// replicas listed, a master with two replicas that kept one and lost the
// other to a promotion granted on the one's acknowledgement while the
// promoted one granted the same ticks (the simulator found the
// duplicate; RELIABILITY.md).
func TestReplicaWait_MasterRestartedEmptyCutOff_MarkRestored(t *testing.T) {
	master, _, link := masterWithReplica(t)
	rdb := master.Client(t)
	reg := newRegKeepLoss(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond, MaxWait: 30 * time.Second})
	if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	link.Cut()
	master.Kill()
	master.Restart(t) // no AOF: it starts empty
	if err := lease.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("renewal on the master restarted empty: %v; want ErrLeaseLost", err)
	}
	if m, err := coord.SplitBrainCheck(ctxT(t), rdb, ""); err != nil || m.Mark != 1 || m.Listed != 0 {
		t.Fatalf("the registry the renewal restored: %+v, %v; want mark 1 with none listed", m, err)
	}
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("claim on the master restarted empty, cut off from its replica: %v; want ErrNotReplicated", err)
	}
	link.Heal()
	waitOnline(t, rdb, 1)
	claimWithin(t, reg, 10*time.Second, "once the replica is back")
}

// A promotion: the promoted replica leaves the mark, the other replica of
// the old master stays in it. The new master grants once that replica
// follows it (Sentinel re-points it), not before; with the old master's
// only other replica gone for good the operator lowers the mark.
func TestReplicaWait_Promotion_MarkLessThePromoted(t *testing.T) {
	redistest.Require(t)
	master := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}})
	var links []*faultproxy.Proxy
	var replicas []*redistest.Server
	for range 2 {
		link := faultproxy.Start(t, master.Addr())
		replicas = append(replicas, redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0",
			"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}}))
		links = append(links, link)
	}
	waitOnline(t, master.Client(t), 2)
	if _, err := newReg(t, master.Client(t), coord.Options{}).Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		l.Cut()
	}
	promoted := replicas[0].Client(t)
	if err := promoted.SlaveOf(ctxT(t), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	reg := newRegKeepLoss(t, promoted, coord.Options{ReplicaWait: 100 * time.Millisecond, MaxWait: 30 * time.Second})
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("claim on the promoted replica before the other follows it: %v; want ErrNotReplicated", err)
	}
	if m, err := coord.SplitBrainCheck(ctxT(t), promoted, ""); err != nil || m.Mark != 1 {
		t.Fatalf("mark on the promoted replica: %+v, %v; want 1 (2 less itself)", m, err)
	}
	if err := replicas[1].Client(t).SlaveOf(ctxT(t), "127.0.0.1", strconv.Itoa(replicas[0].Port())).Err(); err != nil {
		t.Fatal(err)
	}
	waitOnline(t, promoted, 1)
	claimWithin(t, reg, 10*time.Second, "once the other replica follows the new master")
}

// newRegKeepLoss is a registry that keeps the loss guard.lua records
// (newReg would make {ns}:meta look as if this server had always held it).
func newRegKeepLoss(t *testing.T, rdb redis.UniversalClient, o coord.Options) *coord.Registry {
	t.Helper()
	o.Horizon = coord.DefaultHorizon
	r, err := coord.NewRegistry(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// claimWithin claims until it succeeds or within has passed: a replica
// just online acknowledges once it has loaded what it was sent.
func claimWithin(t *testing.T, reg *coord.Registry, within time.Duration, what string) {
	t.Helper()
	start := time.Now()
	for {
		_, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if err == nil {
			t.Logf("claim %s: granted after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > within {
			t.Fatalf("claim %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The node user of deploy/redis/acl.conf may send the WAIT: with a replica
// attached, claims and reservations under it are acknowledged.
func TestReplicaWait_NodeACLUser(t *testing.T) {
	master, _, _ := masterWithReplica(t)
	admin := master.Client(t)
	b, err := os.ReadFile("../deploy/redis/acl.conf")
	if err != nil {
		t.Fatal(err)
	}
	var rules []any
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "user" && f[1] == "flaked-node" {
			rules = append([]any{"ACL", "SETUSER", "flaked-node"}, anys(f[2:])...)
		}
	}
	if rules == nil {
		t.Fatal("deploy/redis/acl.conf has no flaked-node user")
	}
	if err := admin.Do(ctxT(t), rules...).Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr(), Username: "flaked-node", Password: "flaked-node-CHANGE-ME"})
	defer rdb.Close()
	if err := redistest.InitRegistry(ctxT(t), admin, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	reg := newRegKeepLoss(t, rdb, coord.Options{})
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatalf("claim under the node user with a replica: %v", err)
	}
	if _, err := lease.Reserve(ctxT(t), lease.Granted()+10); err != nil {
		t.Fatalf("reserve under the node user with a replica: %v", err)
	}
	if n := waits(t, admin); n < 2 {
		t.Fatalf("%d WAITs, want one per grant", n)
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// On Redis Cluster the WAIT goes to the master of the {ns} slot, on the
// connection that ran the script: with a replica of that master attached,
// grants are acknowledged (a WAIT sent to the other master, which has no
// replica, could not be), the slot's master is the one that ran the
// WAITs, and with the replica paused they are refused.
func TestReplicaWait_Cluster_SlotMaster(t *testing.T) {
	cl := redistest.StartCluster(t, 2)
	cc := cl.Client(t)
	ctx := ctxT(t)
	mc, err := cc.MasterForKey(ctx, "{flaked}:meta")
	if err != nil {
		t.Fatal(err)
	}
	var slotMaster *redistest.Server
	for _, s := range cl.Servers() {
		if s.Addr() == mc.Options().Addr {
			slotMaster = s
		}
	}
	if slotMaster == nil {
		t.Fatalf("no server at %s", mc.Options().Addr)
	}
	masterID, err := mc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	port, bus := redistest.FreePort(t), redistest.FreePort(t)
	replica := redistest.Start(t, redistest.Options{Port: port, Args: []string{
		"cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-port " + strconv.Itoa(bus), "cluster-node-timeout 5000"}})
	rc := replica.Client(t)
	busPort, _ := strconv.Atoi(strings.TrimSpace(slotMaster.Client(t).ConfigGet(ctx, "cluster-port").Val()["cluster-port"]))
	if err := rc.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", slotMaster.Port(), busPort).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for rc.Do(ctx, "CLUSTER", "REPLICATE", masterID).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the new node never learnt the slot's master")
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitOnline(t, slotMaster.Client(t), 1)
	cc.ReloadState(ctx)
	for _, s := range cl.Servers() {
		if err := s.Client(t).ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := redistest.InitRegistry(ctx, cc, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	reg := newRegKeepLoss(t, cc, coord.Options{ReplicaWait: 100 * time.Millisecond, MaxWait: 30 * time.Second})
	claimWithin(t, reg, 10*time.Second, "with the slot master's replica attached")
	for _, s := range cl.Servers() {
		n := waits(t, s.Client(t))
		if s == slotMaster && n == 0 {
			t.Errorf("the slot's master %s ran no WAIT", s.Addr())
		}
		if s != slotMaster && n != 0 {
			t.Errorf("%s, not the slot's master, ran %d WAITs", s.Addr(), n)
		}
	}
	replica.Pause()
	defer replica.Resume()
	if _, err := reg.Claim(ctx, coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("claim with the replica paused: %v; want ErrNotReplicated", err)
	}
}

// ackedWrite reports whether a write reaches n replicas within 1 s.
func ackedWrite(t *testing.T, rdb redis.UniversalClient, n int) bool {
	c, ok := rdb.(*redis.Client)
	if !ok {
		t.Fatalf("ackedWrite on a %T", rdb)
	}
	conn := c.Conn()
	defer conn.Close()
	if conn.Set(ctxT(t), "{flaked}:probe", 1, 0).Err() != nil { // the {ns} slot: on a Cluster, the slot master's
		return false
	}
	return conn.Wait(ctxT(t), n, time.Second).Val() >= int64(n)
}

// Fault covered (docs/model.md, Findings): a master already cut off from
// its replica when the fleet's registry is made lists none, so the mark
// starts at 0 and nothing waits; a replica promoted meanwhile grants too.
// MinReplicas floors every grant's count whatever the mark says: on a
// master with no replica online, claims and counter segments are refused
// (fail closed), and with MinReplicas 0 they are granted without a wait.
func TestMinReplicas_NoReplicaOnline_Refused(t *testing.T) {
	_, rdb := realRedis(t)
	reg := newReg(t, rdb, coord.Options{ReplicaWait: 50 * time.Millisecond, MinReplicas: 1})
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("claim with MinReplicas 1 and no replica: %v, want ErrNotReplicated", err)
	}
	counter, err := fallback.New(rdb, fallback.Options{ReplicaWait: 50 * time.Millisecond, MinReplicas: 1, MinSegment: 10, MaxSegment: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	ctx, cancel := context.WithTimeout(ctxT(t), 500*time.Millisecond)
	defer cancel()
	if id, err := counter.NextID(ctx); err == nil {
		t.Fatalf("counter with MinReplicas 1 and no replica issued %d", id)
	}
	reg0 := newReg(t, rdb, coord.Options{ReplicaWait: 50 * time.Millisecond})
	if _, err := reg0.Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
		t.Fatalf("claim with MinReplicas 0 and no replica: %v", err)
	}
	if _, err := coord.NewRegistry(rdb, coord.Options{MinReplicas: -1}); !errors.Is(err, coord.ErrInvalidOptions) {
		t.Fatalf("MinReplicas -1: %v, want ErrInvalidOptions", err)
	}
}

// Fault covered: two replicas listed in turns, never together (one away,
// for a reboot or a resync, whenever the other is back). A grant only
// the one listed acknowledged is missing from the other, and promoting
// that one while the old master still grants would hand out what a node
// of the old master uses. Counted at once the mark would stay at one, and
// the grant below would be used; counted by address it is two, and the
// grant waits until both are listed, or until the operator says one is
// gone for good (audit replicas --set, which counts the replicas anew).
func TestReplicaWait_ReplicasInTurns_CountedByAddress(t *testing.T) {
	redistest.Require(t)
	master := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}})
	follow := "replicaof 127.0.0.1 " + strconv.Itoa(master.Port())
	a := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0", follow}})
	b := redistest.Start(t, redistest.Options{Args: []string{"repl-diskless-sync-delay 0"}}) // away at first
	rdb := master.Client(t)
	waitOnline(t, rdb, 1)
	reg := newReg(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond})
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
		t.Fatalf("claim with replica a listed: %v", err)
	}
	// a goes away as b comes back: the master lists one replica, b.
	if err := a.Client(t).SlaveOf(ctxT(t), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client(t).SlaveOf(ctxT(t), "127.0.0.1", strconv.Itoa(master.Port())).Err(); err != nil {
		t.Fatal(err)
	}
	waitOnline(t, rdb, 1)
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNotReplicated) {
		t.Fatalf("claim with b listed, a away: %v; want ErrNotReplicated (a was listed since)", err)
	}
	m, err := coord.SplitBrainCheck(ctxT(t), rdb, "")
	if err != nil || m.Mark != 2 || len(m.Since) != 2 || !slices.Equal(m.Away(), []string{"127.0.0.1:" + strconv.Itoa(a.Port())}) ||
		!strings.Contains(m.Problem(), "not now: 127.0.0.1:"+strconv.Itoa(a.Port())) {
		t.Fatalf("SplitBrainCheck with a away: %+v %q, %v; want mark 2, a named as away", m, m.Problem(), err)
	}
	// a back: both listed, the grant is held by both.
	if err := a.Client(t).SlaveOf(ctxT(t), "127.0.0.1", strconv.Itoa(master.Port())).Err(); err != nil {
		t.Fatal(err)
	}
	waitOnline(t, rdb, 2)
	claimWithin(t, reg, 10*time.Second, "with both replicas listed")
	// a gone for good: the operator lowers the mark, which counts anew.
	if err := a.Client(t).SlaveOf(ctxT(t), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	waitOnline(t, rdb, 1)
	if _, err := coord.SetReplicaMark(ctxT(t), rdb, "", 1, "test"); err != nil {
		t.Fatal(err)
	}
	claimWithin(t, reg, 10*time.Second, "once the mark is set to 1")
	if m, err := coord.SplitBrainCheck(ctxT(t), rdb, ""); err != nil || m.Mark != 1 || len(m.Since) != 1 || m.Problem() != "" {
		t.Fatalf("SplitBrainCheck after --set 1: %+v %q, %v; want mark 1, b alone listed since", m, m.Problem(), err)
	}
}

// Fault covered: Redis loses everything (here FLUSHALL) while its one
// replica is away, and the first grant after it is a counter segment of
// a node that held a lease until then (an auto node falling back to
// counter mode just as its lease is lost). The counter restores {ns}:meta
// with the process's last mark, the registry's: with a mark of its own,
// none before its first segment, the mark would start from the replicas
// listed, none, and a segment no replica holds would be used; promoted,
// the replica would grant the same values.
func TestReplicaWait_MetaLost_CounterRestoresTheProcessMark(t *testing.T) {
	master, replica, _ := masterWithReplica(t)
	rdb := master.Client(t)
	reg := newReg(t, rdb, coord.Options{ReplicaWait: 100 * time.Millisecond})
	if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := reg.MarkMemory().Load(); m != 1 {
		t.Fatalf("the registry's mark after a claim with one replica: %d, want 1", m)
	}
	replica.Kill()
	waitOnline(t, rdb, 0)
	if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
		t.Fatal(err)
	}
	counter, err := fallback.New(rdb, fallback.Options{ReplicaWait: 100 * time.Millisecond, MinSegment: 10, MaxSegment: 10,
		Known: true, Marks: reg.MarkMemory()})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	if id, err := counter.NextID(ctx); !errors.Is(err, fallback.ErrUnavailable) || !errors.Is(counter.Stats().LastError, fallback.ErrNotReplicated) {
		t.Fatalf("counter after the loss, the replica away: %d, %v (last error %v); want ErrUnavailable, refused for want of the replica",
			id, err, counter.Stats().LastError)
	}
	if m, err := coord.SplitBrainCheck(ctxT(t), rdb, ""); err != nil || m.Mark != 1 {
		t.Fatalf("the mark {ns}:meta was restored with: %+v, %v; want 1", m, err)
	}
}

// SplitBrainCheck reads the mark and the replicas counted since from one
// HMGET: no registry is -1, a registry with no mark yet 0, and a mark that
// is not a count an error naming it.
func TestSplitBrainCheck_ReadsTheMark(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client(t)
	meta := contract.NewKeys(coord.DefaultNamespace).Meta
	check := func() coord.ReplicaMark {
		t.Helper()
		m, err := coord.SplitBrainCheck(ctxT(t), rdb, "")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := check(); m.Mark != -1 || m.Since != nil {
		t.Fatalf("no registry: %+v", m)
	}
	rdb.HSet(ctxT(t), meta, "generation", "1")
	if m := check(); m.Mark != 0 || m.Since != nil {
		t.Fatalf("a registry with no mark: %+v", m)
	}
	rdb.HSet(ctxT(t), meta, contract.MetaReplicas, "2", contract.MetaReplicaSet, "10.0.0.1:6379,10.0.0.2:6379")
	if m := check(); m.Mark != 2 || len(m.Since) != 2 || m.Since[1] != "10.0.0.2:6379" {
		t.Fatalf("mark 2, two replicas since: %+v", m)
	}
	rdb.HSet(ctxT(t), meta, contract.MetaReplicas, "two")
	if _, err := coord.SplitBrainCheck(ctxT(t), rdb, ""); err == nil || !strings.Contains(err.Error(), `"two"`) {
		t.Fatalf("a mark that is not a count: %v", err)
	}
}
