package tests

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// The faults of this file are the ones an operator causes without meaning
// to: a state file copied to a second node, a backup restored, Redis losing
// acknowledged writes (a stale replica promoted, a restart from an old RDB
// snapshot, everything gone), a node started with another layout after the
// loss. Every fleet runs all three modes at once (flake, auto, counter), and
// every ID is checked.

// mixedFleet makes the registry and starts one daemon in each mode.
func mixedFleet(t *testing.T, url string, extra ...string) []*Daemon {
	t.Helper()
	initRegistry(t, append([]string{"--redis", url}, extra...)...)
	var ds []*Daemon
	for i, mode := range []string{"flake", "auto", "counter"} {
		d := NewDaemon(t, "node"+strconv.Itoa(i+1)+"-"+mode, url, append([]string{"--mode", mode}, extra...)...)
		d.MustStart()
		ds = append(ds, d)
	}
	for _, d := range ds {
		d.WaitReady(t, 30*time.Second)
	}
	return ds
}

// Absorb moves o's records into l, so one Check covers both.
func (l *Load) Absorb(o *Load) {
	o.Stop()
	l.mu.Lock()
	o.mu.Lock()
	l.recs = append(l.recs, o.recs...)
	o.mu.Unlock()
	l.mu.Unlock()
}

// Pid is the running process's PID (0 when down).
func (d *Daemon) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// auditVerify runs `flaked audit verify` and returns its status and output.
func auditVerify(t *testing.T, url string) (int, string) {
	t.Helper()
	out, err := exec.Command(binary, "audit", "verify", "--redis", url).CombinedOutput()
	return exitCode(err), string(out)
}

// eventTypes counts the event stream's entries by type.
func eventTypes(t *testing.T, url string) map[string]int {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	msgs, err := c.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range msgs {
		out[m.Values["type"].(string)]++
	}
	return out
}

// 9. A flake node's state file copied to a second node's path and started
// while the original runs (a copied data directory, a restored VM or
// volume snapshot). The copy takes the machine ID over and fences the
// original, which takes another ID; audit verify names both processes.
func TestDataLoss_StateFileClonedWhileRunning(t *testing.T) {
	srv := redisServer(t, false)
	ds := mixedFleet(t, srv.URL())
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for i := range repeats() {
		clone := NewDaemon(t, "clone"+strconv.Itoa(i), srv.URL())
		copyFile(t, ds[0].StateFile, clone.StateFile)
		clone.MustStart()
		clone.WaitReady(t, 30*time.Second)
		cl := StartLoad([]*Daemon{clone}, connsPerDaemon, batch)
		cl.WaitFor(t, int64(scale(20_000)), time.Minute, "the copy's IDs")
		poll.Until(t, 15*time.Second, "the original logs that it was fenced", func() bool {
			return strings.Contains(ds[0].Log(), "lease fenced")
		})
		load.WaitFor(t, int64(scale(20_000)), time.Minute, "the fleet after the fencing")
		code, out := auditVerify(t, srv.URL())
		if code != 1 || !strings.Contains(out, strconv.Itoa(ds[0].Pid())) || !strings.Contains(out, strconv.Itoa(clone.Pid())) {
			t.Errorf("audit verify while two processes run from one state file: status %d, want 1 naming pids %d and %d:\n%s",
				code, ds[0].Pid(), clone.Pid(), out)
		}
		if ev := eventTypes(t, srv.URL()); ev["fenced"] == 0 {
			t.Errorf("no fenced event: %v", ev)
		}
		load.Absorb(cl)
		clone.Kill()
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

// 10. The same, both started from copies after a clean stop: one takes the
// machine ID, the other finds it held under the same node ID and takes
// another, logging the clone.
func TestDataLoss_StateFileCopiesAfterCleanStop(t *testing.T) {
	srv := redisServer(t, false)
	ds := mixedFleet(t, srv.URL())
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	if err := ds[0].Term(); err != nil {
		t.Fatal(err)
	}
	clone := NewDaemon(t, "clone", srv.URL())
	copyFile(t, ds[0].StateFile, clone.StateFile)
	var wg sync.WaitGroup
	for _, d := range []*Daemon{ds[0], clone} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = d.Start() }()
	}
	wg.Wait()
	for _, d := range []*Daemon{ds[0], clone} {
		d.WaitReady(t, 30*time.Second)
	}
	cl := StartLoad([]*Daemon{clone}, connsPerDaemon, batch)
	cl.WaitFor(t, int64(scale(20_000)), time.Minute, "the copy's IDs")
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "the fleet")
	if !strings.Contains(ds[0].Log()+clone.Log(), "copies of one state file") {
		t.Error("neither copy logged the clone")
	}
	code, out := auditVerify(t, srv.URL())
	if code != 1 || !strings.Contains(out, strconv.Itoa(ds[0].Pid())) || !strings.Contains(out, strconv.Itoa(clone.Pid())) {
		t.Errorf("audit verify: status %d, want 1 naming pids %d and %d:\n%s", code, ds[0].Pid(), clone.Pid(), out)
	}
	load.Absorb(cl)
	load.Stop()
	load.Check(t, defaultLayout())
}

// 11. redis-server with snapshot persistence killed and restarted from a
// snapshot a few seconds old: the registry and the counter come back older
// than what the nodes were granted, with {ns}:meta intact. The flake node
// and the counter node die with it (their memory of what they issued is
// gone); the flake node restarts without its state file, and with 3
// machine IDs and 1 s leases its ID, whose lease the snapshot holds
// expired, looks free at the snapshot's reservation.
func TestDataLoss_RestartFromOldSnapshot(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{Args: []string{"save 3600 1"}})
	ds := mixedFleet(t, srv.URL(), "--bits-machine", "2", "--lease-ttl", "1s")
	l := layoutOf(t, 8, 2)
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	c := srv.Client(t)
	for range repeats() {
		if err := c.Save(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
		load.WaitFor(t, int64(scale(30_000)), time.Minute, "after the snapshot")
		time.Sleep(3 * time.Second) // reservations and counter segments move past the snapshot
		ds[0].Kill()
		ds[2].Kill()
		srv.Kill()
		srv.Restart(t)
		if err := os.Remove(ds[0].StateFile); err != nil {
			t.Fatal(err)
		}
		ds[0].MustStart()
		ds[2].MustStart()
		load.WaitFor(t, int64(scale(60_000)), 2*time.Minute, "after the restart from the old snapshot")
	}
	load.Stop()
	load.Check(t, l)
	if ev := eventTypes(t, srv.URL()); ev["dataloss"] == 0 {
		t.Errorf("no dataloss event after the restart: %v", ev)
	}
}

// 12. A node's state file restored from an old backup while Redis also
// lost its data (restarted without persistence).
func TestDataLoss_OldBackupAndRedisLost(t *testing.T) {
	srv := redisServer(t, false)
	ds := mixedFleet(t, srv.URL())
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	backup := ds[0].StateFile + ".backup"
	copyFile(t, ds[0].StateFile, backup)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "after the backup")
	time.Sleep(3 * time.Second) // the reservation moves past the backup's
	ds[0].Kill()
	srv.Kill()
	srv.Restart(t)
	copyFile(t, backup, ds[0].StateFile)
	ds[0].MustStart()
	ds[0].WaitReady(t, 30*time.Second)
	load.WaitFor(t, int64(scale(60_000)), 2*time.Minute, "after the restore")
	load.Stop()
	load.Check(t, defaultLayout())
}

// 13. After Redis lost its data, a node with another layout starts in the
// fleet's namespace: at once (before any renewal could restore the
// fleet's layout) and a few seconds later. Both are refused, and the
// fleet goes on.
func TestDataLoss_OtherLayoutAfterLoss(t *testing.T) {
	srv := redisServer(t, false)
	ds := mixedFleet(t, srv.URL())
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	other := []string{"--bits-sequence", "10", "--bits-machine", "14"}
	for i, delay := range []time.Duration{0, 5 * time.Second} {
		srv.Kill()
		srv.Restart(t)
		time.Sleep(delay)
		stray := NewDaemon(t, "stray"+strconv.Itoa(i), srv.URL(), other...)
		err := stray.Start()
		if err == nil {
			stray.Kill()
			t.Fatalf("a node with another layout started %v after the loss", delay)
		}
		if !strings.Contains(err.Error(), "layout") {
			t.Fatalf("a node with another layout, %v after the loss: %v", delay, err)
		}
		load.WaitFor(t, int64(scale(30_000)), 2*time.Minute, "the fleet after the stray node")
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

func layoutOf(t *testing.T, seq, machine int) flake.Layout {
	t.Helper()
	l, err := flake.NewLayout(seq, machine, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// 15. The Redis master is lost, and a replica that missed its last
// seconds of writes is promoted: its replication link was cut through a
// proxy (a paused replica would still read what the kernel buffered), so
// it holds older reservations, leases and counter than the nodes were
// granted. The flake node and the counter node die with the master (their
// memory of what they issued is gone) and restart; the auto node reaches
// the new master seconds after the others, through its own proxy. One
// machine bit leaves one leasable ID, so the restarted flake node must take
// the very ID it held, at whatever floor the promoted replica says.
func TestDataLoss_ReplicaMissedWritesPromoted(t *testing.T) {
	redistest.Require(t)
	master := redistest.Start(t, redistest.Options{})
	link := faultproxy.Start(t, master.Addr())
	replica := redistest.Start(t, redistest.Options{Args: []string{"replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	rc := replica.Client(t)
	poll.Until(t, 20*time.Second, "the replica in sync", func() bool {
		info, _ := rc.Info(ctxT(t), "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	l := layoutOf(t, 8, 1)
	// A reach of 3 s: the nodes issue on under what they hold (2 s or
	// more) once the replica is cut off, which is when the writes it
	// misses are made; with the default 1 s the flake node's grant is
	// spent before the load has taken its share.
	initRegistry(t, "--redis", master.URL(), "--bits-machine", "1", "--reserve-ahead", "3s")
	var ds []*Daemon
	var proxies []*faultproxy.Proxy
	for i, mode := range []string{"flake", "auto", "counter"} {
		p := faultproxy.Start(t, master.Addr())
		d := NewDaemon(t, "node"+strconv.Itoa(i+1)+"-"+mode, "redis://"+p.Addr(),
			"--mode", mode, "--bits-machine", "1", "--lease-ttl", "1s", "--reserve-ahead", "3s")
		d.MustStart()
		d.WaitReady(t, 30*time.Second)
		ds, proxies = append(ds, d), append(proxies, p)
	}
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for range repeats() {
		link.Cut() // from here the replica misses every write
		// Not scaled by --long: nothing past what the nodes hold before
		// the cut (about 70,000 IDs at this load) can be granted, since no
		// grant is used that the cut-off replica has not acknowledged.
		load.WaitFor(t, 20_000, time.Minute, "writes the replica misses")
		time.Sleep(2 * time.Second)
		ds[0].Kill()
		ds[2].Kill()
		master.Kill()
		if err := rc.SlaveOf(ctxT(t), "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		// The nodes learn of the new master at different moments.
		proxies[0].Redirect(replica.Addr())
		proxies[2].Redirect(replica.Addr())
		ds[0].MustStart()
		ds[2].MustStart()
		time.Sleep(2 * time.Second)
		proxies[1].Redirect(replica.Addr())
		load.WaitFor(t, int64(scale(60_000)), 2*time.Minute, "after the promotion")
		// The next round: the old master comes back as the new one's
		// replica, through the link.
		master.Restart(t)
		mc := master.Client(t)
		link.Redirect(replica.Addr())
		link.Heal()
		if err := mc.SlaveOf(ctxT(t), "127.0.0.1", strconv.Itoa(link.Port())).Err(); err != nil {
			t.Fatal(err)
		}
		master, replica = replica, master
		rc = replica.Client(t)
		poll.Until(t, 20*time.Second, "the old master in sync as a replica", func() bool {
			info, _ := rc.Info(ctxT(t), "replication").Result()
			return strings.Contains(info, "master_link_status:up")
		})
	}
	load.Stop()
	load.Check(t, l)
	if ev := eventTypes(t, "redis://"+master.Addr()); ev["dataloss"] == 0 {
		t.Errorf("no dataloss event after the promotion: %v", ev)
	}
}
