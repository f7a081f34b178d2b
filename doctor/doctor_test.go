package doctor_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// results runs every check and returns those of check.
func results(t *testing.T, tg doctor.Target, check string) ([]doctor.Result, []doctor.Result) {
	t.Helper()
	all := doctor.Run(ctxT(t), tg)
	var of []doctor.Result
	for _, r := range all {
		if r.Check == check {
			of = append(of, r)
		}
	}
	if len(of) == 0 {
		t.Fatalf("no %s result in %+v", check, all)
	}
	return of, all
}

func mustStatus(t *testing.T, rs []doctor.Result, want doctor.Status, words ...string) {
	t.Helper()
	for _, r := range rs {
		if r.Status != want {
			t.Errorf("%s [%s]: %s, want %s: %s", r.Check, r.Server, r.Status, want, r.Detail)
		}
		for _, w := range words {
			if !strings.Contains(r.Detail+" "+r.Fix, w) {
				t.Errorf("%s: %q does not name %q", r.Check, r.Detail+" fix: "+r.Fix, w)
			}
		}
	}
}

func TestDoctor_HealthyServer_NothingUnsafe(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{AOF: true})
	id, all := results(t, doctor.Target{Redis: srv.Client(t)}, "identity")
	mustStatus(t, id, doctor.OK)
	if w := doctor.Worst(all); w == doctor.Unsafe {
		t.Fatalf("healthy redis-server: %+v", all)
	}
	for _, name := range []string{"acl", "clock", "eviction", "fleet", "lease", "persistence", "replication"} {
		if !slices.Contains(doctor.Checks(), name) {
			t.Errorf("check %s not registered: %v", name, doctor.Checks())
		}
	}
	p, _ := results(t, doctor.Target{Redis: srv.Client(t)}, "persistence")
	mustStatus(t, p, doctor.OK, "appendfsync always")
}

// A namespace without a registry: costly (doctor cannot tell a new fleet
// from a Redis that lost its data, whose nodes restore it), naming
// NOREGISTRY and flaked init; after init the fleet check is ok.
func TestDoctor_Fleet_NoRegistry_NamesInit(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	f, _ := results(t, doctor.Target{Redis: rdb}, "fleet")
	mustStatus(t, f, doctor.Costly, "no registry", "NOREGISTRY", "flaked init")
	if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	f, _ = results(t, doctor.Target{Redis: rdb}, "fleet")
	mustStatus(t, f, doctor.OK, "generation "+redistest.Generation)
	if err := rdb.Del(ctxT(t), contract.NewKeys(coord.DefaultNamespace).Layout).Err(); err != nil {
		t.Fatal(err)
	}
	f, _ = results(t, doctor.Target{Redis: rdb}, "fleet")
	mustStatus(t, f, doctor.Costly, "{flaked}:layout missing")
}

// narrowUser creates a user with the node's rules but INFO replaced by
// info.
func narrowUser(t *testing.T, admin *redis.Client, name string, info ...string) *redis.Client {
	t.Helper()
	args := []any{"ACL", "SETUSER", name, "on", "nopass", "resetkeys", "~{flaked}:*", "-@all",
		"+evalsha", "+eval", "+get", "+set", "+del", "+exists", "+pexpire", "+hget", "+hmget", "+hset", "+hdel",
		"+sadd", "+srem", "+srandmember", "+xadd", "+time"}
	for _, r := range info {
		args = append(args, r)
	}
	if err := admin.Do(ctxT(t), args...).Err(); err != nil {
		t.Fatal(err)
	}
	o := admin.Options()
	c := redis.NewClient(&redis.Options{Addr: o.Addr, Username: name, Password: "x"})
	t.Cleanup(func() { c.Close() })
	return c
}

// Fault: the nodes' user granted INFO for one section only. Redis checks a
// first-arg rule (+info|<section>) against the first section of guard.lua's
// one call, INFO server replication memory: +info|replication alone is
// refused there (unsafe, naming +info), +info|server alone passes and the
// script reads all three sections (the identity is read: ok).
func TestDoctor_NarrowedINFO(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	admin := srv.Client(t)
	repl := narrowUser(t, admin, "only-repl", "+info|replication")
	id, _ := results(t, doctor.Target{Redis: repl}, "identity")
	mustStatus(t, id, doctor.Unsafe, "+info", "refused")
	none := narrowUser(t, admin, "no-info")
	id, _ = results(t, doctor.Target{Redis: none}, "identity")
	mustStatus(t, id, doctor.Unsafe, "+info")
	server := narrowUser(t, admin, "only-server", "+info|server")
	id, _ = results(t, doctor.Target{Redis: server}, "identity")
	mustStatus(t, id, doctor.OK)
	ev, _ := results(t, doctor.Target{Redis: server}, "eviction")
	mustStatus(t, ev, doctor.OK, "noeviction")
}

// Fault: INFO renamed away (a common hardening): unsafe, naming
// rename-command.
func TestDoctor_RenamedINFO(t *testing.T) {
	redistest.Require(t)
	for _, rename := range []string{`rename-command INFO ""`, "rename-command INFO info-secret-7"} {
		srv := redistest.Start(t, redistest.Options{Args: []string{rename}})
		id, _ := results(t, doctor.Target{Redis: srv.Client(t)}, "identity")
		mustStatus(t, id, doctor.Unsafe, "rename-command INFO")
	}
}

// Fault: a Redis shared with a cache, allkeys-* eviction: unsafe, naming
// the policy and the fix; volatile-* is costly (leases may be evicted).
func TestDoctor_EvictionPolicies(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{Args: []string{"maxmemory-policy allkeys-random"}})
	ev, _ := results(t, doctor.Target{Redis: srv.Client(t)}, "eviction")
	mustStatus(t, ev, doctor.Unsafe, "allkeys-random", "noeviction")
	if err := srv.Client(t).ConfigSet(ctxT(t), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	ev, _ = results(t, doctor.Target{Redis: srv.Client(t)}, "eviction")
	mustStatus(t, ev, doctor.Costly, "volatile-lru", "taken over")
}

func TestDoctor_Sentinel_NothingUnsafe(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	tg := doctor.Target{Redis: s.Client(t), Sentinels: s.SentinelAddrs(), MasterName: s.MasterName()}
	sen, all := results(t, tg, "sentinel")
	mustStatus(t, sen, doctor.OK, "down-after-milliseconds 1000")
	if w := doctor.Worst(all); w == doctor.Unsafe {
		t.Fatalf("Sentinel deployment: %+v", all)
	}
	// The rule that rides out replica trouble through Sentinel: every
	// Sentinel reports the master up; down-after 1 s is short of what
	// lets a check vouch reliably, which it names with the fix.
	// A check made when the Sentinel's last PING reply is nearly 1 s old
	// vouches for nothing: the next one does.
	var ride []doctor.Result
	for i := 0; i < 10 && (len(ride) == 0 || !strings.Contains(ride[0].Detail, "reports the master up")); i++ {
		if i > 0 {
			time.Sleep(150 * time.Millisecond) // the Sentinel's next PING
		}
		ride, _ = results(t, tg, "rideout")
	}
	if len(ride) != 1 {
		t.Fatalf("rideout: %+v", ride)
	}
	mustStatus(t, ride, doctor.Costly, "every Sentinel reports the master up", "down-after-milliseconds 1000", "2000 or more")
	// Without Sentinel the ride-out is the nodes' reach, and the operator's
	// path names the command that lowers the mark.
	plain, _ := results(t, doctor.Target{Redis: s.Master().Client(t)}, "rideout")
	if len(plain) != 1 {
		t.Fatalf("rideout without Sentinel: %+v", plain)
	}
	mustStatus(t, plain, doctor.OK, "no Sentinel", "--reserve-ahead", "flaked audit replicas --set")
	clocks, _ := results(t, tg, "clock")
	if len(clocks) < 3 { // master, replica, and the two against each other
		t.Fatalf("clock results %+v: want the master, its replica and the comparison", clocks)
	}
}

func TestDoctor_Cluster_NothingUnsafe(t *testing.T) {
	redistest.Require(t)
	c := redistest.StartCluster(t, 3)
	id, all := results(t, doctor.Target{Redis: c.Client(t)}, "identity")
	if len(id) != 3 {
		t.Fatalf("identity results %+v: want one per master", id)
	}
	mustStatus(t, id, doctor.OK)
	if w := doctor.Worst(all); w == doctor.Unsafe {
		t.Fatalf("Cluster: %+v", all)
	}
}

// TestNodeCommands_MatchACLFile: the acl check asks ACL DRYRUN about the
// commands deploy/redis/acl.conf grants flaked-node, no more, no fewer.
func TestNodeCommands_MatchACLFile(t *testing.T) {
	b, err := os.ReadFile("../deploy/redis/acl.conf")
	if err != nil {
		t.Fatal(err)
	}
	var granted []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "flaked-node" {
			for _, r := range f[2:] {
				if c, ok := strings.CutPrefix(r, "+"); ok {
					granted = append(granted, c)
				}
			}
		}
	}
	checked := doctor.NodeCommands()
	slices.Sort(granted)
	slices.Sort(checked)
	if !slices.Equal(granted, checked) {
		t.Fatalf("acl.conf grants flaked-node %v; the acl check asks about %v", granted, checked)
	}
}

// The split-brain check on a Sentinel deployment: after a claim the fleet's
// replicas mark counts the replica, and every grant waits for it (ok).
// With the mark lowered to 0 (an operator's --set while the replica still
// runs) and nodes started with --min-replicas 0, grants wait for no
// replica, and a promotion could lose grants the nodes used: unsafe,
// naming the fix. With the replica gone, a grant the Sentinels do not
// vouch for waits for it and is refused: costly, naming SENTINEL RESET.
func TestDoctor_SplitBrain_MarkAgainstSentinel(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	rdb := s.Client(t)
	if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	reg, err := coord.NewRegistry(rdb, coord.Options{MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The replica's first acknowledgement may take up to a second after
	// its sync: the claim retries until WAIT confirms it.
	lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background(), -1)
	tg := doctor.Target{Redis: rdb, Sentinels: s.SentinelAddrs(), MasterName: s.MasterName()}
	sb, _ := results(t, tg, "splitbrain")
	mustStatus(t, sb, doctor.OK)
	if _, err := coord.SetReplicaMark(ctxT(t), rdb, "", 0, "test"); err != nil {
		t.Fatal(err)
	}
	// The floor the nodes take through Sentinel by default
	// (coord.SentinelMinReplicas) counts the replica the mark does not.
	sb, _ = results(t, tg, "splitbrain")
	mustStatus(t, sb, doctor.OK)
	mustStatus(t, sb[:1], doctor.OK, "the floor --min-replicas 1")
	tg.MinReplicas = doctor.NoMinReplicas // nodes started with --min-replicas 0
	sb, all := results(t, tg, "splitbrain")
	var unsafe []doctor.Result
	for _, r := range sb {
		if r.Status == doctor.Unsafe {
			unsafe = append(unsafe, r)
		}
	}
	if len(unsafe) == 0 || doctor.Worst(all) != doctor.Unsafe {
		t.Fatalf("mark 0 below the replica Sentinel may promote: %+v, want unsafe", sb)
	}
	mustStatus(t, unsafe, doctor.Unsafe, "Sentinel knows", "SENTINEL RESET")

	tg.MinReplicas = 0
	s.Replica().Kill()
	sb, _ = results(t, tg, "splitbrain")
	var known []doctor.Result
	for _, r := range sb {
		if r.Server != "" {
			known = append(known, r)
		}
	}
	if len(known) == 0 {
		t.Fatalf("no Sentinel row: %+v", sb)
	}
	mustStatus(t, known, doctor.Costly, "Sentinel knows 1", "waits for all 1 and is refused", "SENTINEL RESET")
}
