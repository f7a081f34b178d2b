package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/seq"
)

// The named sequences' faults (NEXTSEQ, docs/sequences.md): clean
// restarts of every node under load (dense), kill -9 (a gap, never a
// reuse), Redis restarted from an old snapshot and a failover to a replica
// that missed writes (0 values handed out twice). Every value is checked.

const seqTag = "orders"

// SeqLoad drives NEXTSEQ tag n from many connections and keeps every
// value: a Load whose records hold values instead of IDs.
type SeqLoad struct{ *Load }

func StartSeqLoad(daemons []*Daemon, perDaemon, n int) *SeqLoad {
	return &SeqLoad{startLoad(daemons, perDaemon, 0, Request{ReadTimeout: 3 * time.Second,
		Send: func(ctx context.Context, c *redis.Client, _ *rand.Rand) ([]uint64, error) {
			vals, err := c.Do(ctx, "NEXTSEQ", seqTag, n).Int64Slice()
			if err != nil {
				return nil, err
			}
			out := make([]uint64, len(vals))
			for i, v := range vals {
				if v < 0 {
					return nil, fmt.Errorf("%w: NEXTSEQ value %d is negative", errMalformed, v)
				}
				out[i] = uint64(v)
			}
			return out, nil
		}})}
}

// Check fails on any value handed out twice and on values that do not
// increase strictly per connection and daemon incarnation; it returns
// every value, sorted.
func (l *SeqLoad) Check(t testing.TB) []int64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	type key struct {
		conn int
		inc  int64
	}
	last := map[key]int64{}
	var all []int64
	for _, r := range l.recs {
		for _, u := range r.ids {
			v := int64(u)
			if r.inc != 0 {
				k := key{r.conn, r.inc}
				if v <= last[k] {
					t.Errorf("%s conn %d: value %d after %d in one process", r.daemon, r.conn, v, last[k])
				}
				last[k] = v
			}
			all = append(all, v)
		}
	}
	slices.Sort(all)
	dups := 0
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			if dups < 10 {
				t.Errorf("value %d handed out twice", all[i])
			}
			dups++
		}
	}
	if dups > 0 {
		t.Fatalf("%d values handed out twice of %d", dups, len(all))
	}
	t.Logf("%d values checked: no duplicate, increasing per process", len(all))
	return all
}

// Highest is the highest value handed out so far: an operator's records.
func (l *SeqLoad) Highest() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var h uint64
	for _, r := range l.recs {
		for _, v := range r.ids {
			h = max(h, v)
		}
	}
	return int64(h)
}

// seqCreate runs `flaked seq create` on the built binary, after making
// the fleet's registry when there is none (flaked init comes first: a
// namespace without a registry is refused, NOREGISTRY).
func seqCreate(t *testing.T, url string, flags ...string) {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	n, err := rdb.Exists(ctxT(t), contract.NewKeys(coord.DefaultNamespace).Meta).Result()
	rdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		initRegistry(t, "--redis", url)
	}
	args := append(append([]string{"seq", "create", "--redis", url}, flags...), seqTag)
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("flaked %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func seqInfo(t *testing.T, url string) seq.TagInfo {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ti, err := seq.Info(ctxT(t), rdb, "flaked", seqTag)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

// seqFleet creates the tag with flags and starts one daemon in each mode
// (the mode of IDs does not matter to sequences, which run beside it),
// under a load of NEXTSEQ that has taken its first values.
func seqFleet(t *testing.T, url string, flags ...string) ([]*Daemon, *SeqLoad) {
	seqCreate(t, url, flags...)
	ds := mixedFleet(t, url)
	load := StartSeqLoad(ds, connsPerDaemon, 10)
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "warm-up")
	return ds, load
}

// Clean restarts (SIGTERM) of every node, in turn, under load: each gives
// its unused values back, so fewer than 0.1% of the values up to the
// high-water mark are skipped. Fault covered: a give-back that returned
// values another node holds (duplicates), and a restart that loses its
// segments (gaps).
func TestSeq_DenseAcrossCleanRestarts(t *testing.T) {
	srv := redisServer(t, false)
	ds, load := seqFleet(t, srv.URL(), "--step", "500")
	for range 2 * repeats() {
		for _, d := range ds {
			if err := d.Term(); err != nil {
				t.Fatal(err)
			}
			load.WaitFor(t, int64(scale(5_000)), time.Minute, "while "+d.Name+" is down")
			d.MustStart()
			d.WaitReady(t, 30*time.Second)
			load.WaitFor(t, int64(scale(10_000)), time.Minute, "after "+d.Name+" restarted")
		}
	}
	load.Stop()
	for _, d := range ds {
		if err := d.Term(); err != nil {
			t.Fatal(err)
		}
	}
	all := load.Check(t)
	ti := seqInfo(t, srv.URL())
	span := ti.High - ti.Start + 1
	skipped := span - int64(len(all)) - ti.FreeCount
	t.Logf("high %d, %d values handed out, %d free (given back, not yet handed out again), %d skipped; given back %d, lost %d",
		ti.High, len(all), ti.FreeCount, skipped, ti.GivenBack, ti.Lost)
	if float64(skipped) >= 0.001*float64(span) {
		t.Fatalf("%d of %d values skipped across clean restarts (>= 0.1%%)", skipped, span)
	}
}

// kill -9 of a node under load: its segments are a gap (at most two steps
// per kill), never handed out again.
func TestSeq_KillLeavesGapNeverReuse(t *testing.T) {
	srv := redisServer(t, false)
	const step = 300
	ds, load := seqFleet(t, srv.URL(), "--step", strconv.Itoa(step))
	kills := 0
	for range repeats() {
		for _, d := range ds {
			d.Kill()
			kills++
			d.MustStart()
			d.WaitReady(t, 30*time.Second)
			load.WaitFor(t, int64(scale(10_000)), time.Minute, "after "+d.Name+" was killed")
		}
	}
	load.Stop()
	for _, d := range ds {
		if err := d.Term(); err != nil {
			t.Fatal(err)
		}
	}
	all := load.Check(t)
	ti := seqInfo(t, srv.URL())
	skipped := ti.High - ti.Start + 1 - int64(len(all)) - ti.FreeCount
	// A node holds two segments (the one in use and the one fetched
	// ahead), each of the step or, under load, of about 50-100 ms of its
	// traffic (the adaptive size): what a kill may skip.
	t.Logf("%d kills: %d values skipped of %d (%.2f%%; step %d)", kills, skipped, ti.High, 100*float64(skipped)/float64(ti.High), step)
	if skipped > int64(kills)*2*seq.MaxStep {
		t.Fatalf("%d values skipped by %d kills, more than two segments each", skipped, kills)
	}
}

// The tag's hash deleted under load (evicted, or a DEL by mistake) while
// Redis lost nothing else: the nodes refuse the tag once their segments
// are spent, and an operator restores it above the highest value the
// records hold. The restore waits until no segment granted before can be
// handed out (flaked seq restore says so and fails; the operator runs it
// again, reading the records again). Fault covered: segments granted
// before the deletion handed out after a restore made from records that
// did not hold them yet, or given back into the restored tag: values
// handed out twice.
func TestSeq_TagDeletedThenRestored(t *testing.T) {
	srv := redisServer(t, false)
	ds, load := seqFleet(t, srv.URL(), "--step", "2000")
	if err := srv.Client(t).Del(ctxT(t), contract.NewKeys(coord.DefaultNamespace).Seq(seqTag)).Err(); err != nil {
		t.Fatal(err)
	}
	restore := func() (string, error) {
		out, err := exec.Command(binary, "seq", "restore", "--redis", srv.URL(),
			"--above", strconv.FormatInt(load.Highest(), 10), seqTag).CombinedOutput()
		return string(out), err
	}
	if out, err := restore(); err == nil || !strings.Contains(out, "too early") {
		t.Fatalf("restore right after the deletion: %v\n%s\nwant too early (segments granted before are still handed out)", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		time.Sleep(time.Second) // the operator's retry
		out, err := restore()
		if err == nil {
			break
		}
		if !strings.Contains(out, "too early") || time.Now().After(deadline) {
			t.Fatalf("flaked seq restore: %v\n%s", err, out)
		}
	}
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "after the restore")
	load.Stop()
	for _, d := range ds {
		if err := d.Term(); err != nil {
			t.Fatal(err)
		}
	}
	load.Check(t)
}

// Redis restarted from an old RDB snapshot while the nodes had been
// granted segments after it: two nodes die with it (their memory of what
// they were granted is gone), one runs on. The tag must continue above
// every value handed out before (the rate bound); 0 duplicates.
func TestSeq_RestartFromOldSnapshot(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{Args: []string{"save 3600 1"}})
	ds, load := seqFleet(t, srv.URL(), "--step", "200", "--rate", "200000")
	c := srv.Client(t)
	for range repeats() {
		if err := c.Save(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		load.WaitFor(t, int64(scale(30_000)), time.Minute, "after the snapshot")
		before := seqInfo(t, srv.URL())
		ds[0].Kill()
		ds[2].Kill()
		srv.Kill()
		srv.Restart(t)
		ds[0].MustStart()
		ds[2].MustStart()
		load.WaitFor(t, int64(scale(30_000)), 2*time.Minute, "after the restart from the old snapshot")
		after := seqInfo(t, srv.URL())
		t.Logf("high before the restart %d; after %d; lost to the jump %d (rate 200000/s)", before.High, after.High, after.Lost)
	}
	load.Stop()
	load.Check(t)
	if ti := seqInfo(t, srv.URL()); ti.Jumps < 1 {
		t.Errorf("no loss jump recorded: %+v", ti)
	}
}

// A failover to a replica that missed writes (its link cut): grants are
// then no longer acknowledged, so the nodes stop after their buffers (the
// split-brain rule), and the promoted replica continues above the loss
// floor. The flake and counter nodes die with the master; the auto node
// reaches the new master seconds after the others. 0 duplicates.
func TestSeq_ReplicaMissedWritesPromoted(t *testing.T) {
	redistest.Require(t)
	master := redistest.Start(t, redistest.Options{})
	link := faultproxy.Start(t, master.Addr())
	replica := redistest.Start(t, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	rc := replica.Client(t)
	poll.Until(t, 20*time.Second, "the replica in sync", func() bool {
		info, _ := rc.Info(ctxT(t), "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	seqCreate(t, master.URL(), "--step", "200", "--rate", "200000")
	var ds []*Daemon
	var proxies []*faultproxy.Proxy
	for i, mode := range []string{"flake", "auto", "counter"} {
		p := faultproxy.Start(t, master.Addr())
		d := NewDaemon(t, "node"+strconv.Itoa(i+1)+"-"+mode, "redis://"+p.Addr(), "--mode", mode)
		d.MustStart()
		d.WaitReady(t, 30*time.Second)
		ds, proxies = append(ds, d), append(proxies, p)
	}
	load := StartSeqLoad(ds, connsPerDaemon, 10)
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "warm-up")
	poll.Until(t, 20*time.Second, "the replica has the tag", func() bool {
		n, _ := rc.Exists(ctxT(t), "{flaked}:seq:"+seqTag).Result()
		return n == 1
	})
	link.Cut() // from here the replica misses every write
	// No grant is acknowledged any more: the nodes hand out what they
	// hold, then fail closed (the fleet's split-brain rule), so what the
	// replica misses are grants nobody used, and the loss floor.
	// Requests first end at --id-wait while a grant's WAIT is out; the
	// refusal's reason follows once the WAIT timed out.
	poll.Until(t, 15*time.Second, "grants after the cut refused as not acknowledged", func() bool {
		p := load.lastErr.Load()
		return p != nil && strings.Contains(*p, "not acknowledged by the replicas")
	})
	ds[0].Kill()
	ds[2].Kill()
	master.Kill()
	if err := rc.SlaveOf(ctxT(t), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	proxies[0].Redirect(replica.Addr())
	proxies[2].Redirect(replica.Addr())
	ds[0].MustStart()
	ds[2].MustStart()
	time.Sleep(2 * time.Second)
	proxies[1].Redirect(replica.Addr())
	load.WaitFor(t, int64(scale(30_000)), 2*time.Minute, "after the promotion")
	load.Stop()
	load.Check(t)
	ti := seqInfo(t, "redis://"+replica.Addr())
	if ti.Jumps < 1 {
		t.Errorf("no loss jump recorded: %+v", ti)
	}
	t.Logf("after the promotion: high %d, lost to the jump %d", ti.High, ti.Lost)
}

// The users file's node user may run everything sequences need (seq.lua's
// calls, WAIT), the audit user may list them, and Redis logs no refusal.
// A replica is attached, so every grant waits for its acknowledgement.
func TestSeq_UnderACLUsers(t *testing.T) {
	redistest.Require(t)
	abs, err := filepath.Abs(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Options{Args: []string{"aclfile " + abs}})
	redistest.Start(t, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(srv.Port())}})
	admin := srv.Client(t)
	poll.Until(t, 20*time.Second, "the replica attached", func() bool {
		info, _ := admin.Info(ctxT(t), "replication").Result()
		return strings.Contains(info, "connected_slaves:1")
	})
	nodeURL, auditURL := aclURL(t, srv, "flaked-node"), aclURL(t, srv, "flaked-audit")
	initRegistry(t, "--redis", srv.URL()) // as the admin: flaked init's user is the operator's
	seqCreate(t, nodeURL, "--step", "100")
	d := NewDaemon(t, "counter", nodeURL, "--mode", "counter")
	d.MustStart()
	d.WaitReady(t, 20*time.Second)
	load := StartSeqLoad([]*Daemon{d}, 2, 10)
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "values under the node user")
	load.Stop()
	load.Check(t)
	if err := d.Term(); err != nil {
		t.Fatal(err)
	}
	if code, out := flakedCmd(t, "seq", "list", "--redis", auditURL); code != 0 || !strings.Contains(out, seqTag) {
		t.Fatalf("flaked seq list under the audit user: exit %d\n%s", code, out)
	}
	// The audit shows the tags, and their events do not confuse verify.
	if code, out := flakedCmd(t, "audit", "--redis", auditURL); code != 0 || !strings.Contains(out, "sequence tags (1)") {
		t.Fatalf("flaked audit: exit %d\n%s", code, out)
	}
	if code, out := flakedCmd(t, "audit", "verify", "--redis", auditURL); code != 0 {
		t.Fatalf("flaked audit verify: exit %d\n%s", code, out)
	}
	if n, _ := admin.Do(ctxT(t), "ACL", "LOG").Slice(); len(n) != 0 {
		t.Fatalf("ACL LOG: %v", n)
	}
}
