package tests

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// Every fault test: a fleet under load from several connections per
// daemon, a fault, load again, and every ID checked. Durations are short
// (lease TTL 1 s where the fault needs a lease to expire) so the short run
// takes a few minutes; FLAKED_FLEET_LONG=1 collects 10x the IDs and
// repeats each fault.

const (
	connsPerDaemon = 3
	batch          = 50
)

func repeats() int {
	if long {
		return 3
	}
	return 1
}

func redisServer(t *testing.T, aof bool) *redistest.Server {
	t.Helper()
	redistest.Require(t)
	return redistest.Start(t, redistest.Options{AOF: aof})
}

// 1. kill -9 a node and restart it, with its state file and without it.
func TestFleet_KillAndRestart(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 3, srv.URL(), "--machine-ids", "2")
	stopWatch := Watch(t, ds)
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(50_000)), time.Minute, "warm-up")
	for range repeats() {
		ds[0].Kill()
		ds[0].MustStart() // with its state file
		load.WaitFor(t, int64(scale(50_000)), time.Minute, "after kill -9 and restart with the state file")
		ds[1].Kill()
		if err := os.Remove(ds[1].StateFile); err != nil {
			t.Fatal(err)
		}
		ds[1].MustStart() // without it
		load.WaitFor(t, int64(scale(50_000)), time.Minute, "after kill -9 and restart without the state file")
	}
	load.Stop()
	stopWatch()
	load.Check(t, defaultLayout())
}

// 2. SIGSTOP a node past its lease TTL, let another node take its machine
// ID, SIGCONT it. The machine-ID space is 3 IDs (2 bits), so the new node
// can only take the stopped one's.
func TestFleet_PausedPastLease_TakenOver(t *testing.T) {
	srv := redisServer(t, false)
	flags := []string{"--bits-machine", "2", "--lease-ttl", "1s"}
	ds := fleet(t, 3, srv.URL(), flags...)
	l, err := flake.NewLayout(8, 2, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ds[0].Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	victimID := info["machine_ids"]
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for range repeats() {
		ds[0].Signal(syscall.SIGSTOP)
		time.Sleep(2500 * time.Millisecond) // > lease TTL
		taker := NewDaemon(t, "taker", srv.URL(), flags...)
		taker.StateFile = ""
		taker.MustStart()
		taker.WaitReady(t, 20*time.Second)
		ti, err := taker.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if ti["machine_ids"] != victimID {
			t.Fatalf("the new node took machine ID %q, the stopped one held %q", ti["machine_ids"], victimID)
		}
		takerLoad := StartLoad([]*Daemon{taker}, connsPerDaemon, batch)
		takerLoad.WaitFor(t, int64(scale(10_000)), time.Minute, "the new owner's IDs")
		ds[0].Signal(syscall.SIGCONT)
		// The old owner may still issue what it had reserved, never more;
		// then it has no machine ID left to take and must refuse.
		load.WaitFor(t, int64(scale(20_000)), time.Minute, "after SIGCONT")
		takerLoad.WaitFor(t, int64(scale(10_000)), time.Minute, "the new owner's IDs after SIGCONT")
		takerLoad.Stop()
		load.mu.Lock()
		takerLoad.mu.Lock()
		load.recs = append(load.recs, takerLoad.recs...)
		takerLoad.mu.Unlock()
		load.mu.Unlock()
		taker.Kill()
	}
	load.Stop()
	load.Check(t, l)
}

// 3. The clock of a restarted node set back by 1 min and by 1 h (the
// daemon's test-only --test-clock-offset). In auto mode it serves counter
// IDs; in flake mode it refuses to start.
func TestFleet_ClockSetBack(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 3, srv.URL(), "--mode", "auto")
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	base := slices.Clone(ds[0].Args)
	for _, back := range []string{"-1m", "-1h"} {
		ds[0].Kill()
		ds[0].SetArgs(append(slices.Clone(base), "--test-clock-offset", back))
		ds[0].MustStart()
		load.WaitFor(t, int64(scale(30_000)), time.Minute, "after a restart with the clock "+back)
		info, err := ds[0].Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if info["mode"] != "counter" {
			t.Fatalf("node with its clock %s: mode %q, want counter", back, info["mode"])
		}
	}
	// Flake mode refuses a clock 1 h off, naming the skew.
	d := NewDaemon(t, "flake-1h", srv.URL(), "--test-clock-offset", "-1h")
	err := d.Start()
	if err == nil || !strings.Contains(err.Error(), "skew") {
		t.Fatalf("flake mode with the clock 1h back: %v", err)
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

// 4. Redis killed and restarted, with AOF and without persistence.
func TestFleet_RedisRestart(t *testing.T) {
	for _, aof := range []bool{true, false} {
		name := "aof"
		if !aof {
			name = "no-persistence"
		}
		t.Run(name, func(t *testing.T) {
			srv := redisServer(t, aof)
			ds := fleet(t, 3, srv.URL(), "--mode", "auto")
			load := StartLoad(ds, connsPerDaemon, batch)
			load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
			for range repeats() {
				srv.Kill()
				time.Sleep(500 * time.Millisecond)
				srv.Restart(t)
				load.WaitFor(t, int64(scale(60_000)), 2*time.Minute, "after the Redis restart")
			}
			load.Stop()
			load.Check(t, defaultLayout())
		})
	}
}

// 5. Redis unreachable for longer than the reservation lasts (a reach of
// 1 s: 1 s ahead plus 1 s lead; the default, 12 s, rides the pause out):
// nodes go to counter mode or return errors, never guess.
func TestFleet_RedisUnreachable(t *testing.T) {
	srv := redisServer(t, false)
	reach := []string{"--reserve-ahead", "1s"}
	ds := fleet(t, 2, srv.URL(), append(reach, "--mode", "auto")...)
	ds = append(ds, fleet(t, 1, srv.URL(), reach...)...) // one in flake mode
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for range repeats() {
		before := load.errs.Load()
		srv.Pause()
		time.Sleep(5 * time.Second)
		srv.Resume()
		if load.errs.Load() == before {
			t.Error("no request failed while Redis was unreachable past the reservation: something issued without it")
		}
		load.WaitFor(t, int64(scale(60_000)), 2*time.Minute, "after Redis is back")
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

// 5b. A fleet that holds long reservations (--reserve-ahead 6s: a node
// holds 3-6 s ahead of use), two nodes in auto mode and one in flake mode:
// Redis paused for less than that, then restarted empty. Faults covered: a
// node issuing through a pause under its own grant, and a total loss with
// a long horizon (claims after it must start above every grant made
// before it, which reached 6 s past the clock). Every ID checked.
func TestFleet_LongReach_RedisPausedThenLost(t *testing.T) {
	srv := redisServer(t, false)
	reach := []string{"--reserve-ahead", "6s"}
	ds := fleet(t, 2, srv.URL(), append(reach, "--mode", "auto")...)
	ds = append(ds, startFleet(t, 1, srv.URL(), reach...)...)
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for range repeats() {
		srv.Pause()
		time.Sleep(2 * time.Second)
		srv.Resume()
		load.WaitFor(t, int64(scale(30_000)), time.Minute, "after the pause")
		// The grants made before the loss, which the nodes go on issuing
		// under until they are spent.
		var granted int64
		for _, d := range ds {
			g, err := strconv.ParseInt(infoField(t, d, "tick_reserved"), 10, 64)
			if err != nil {
				t.Fatalf("%s: tick_reserved: %v", d.Name, err)
			}
			granted = max(granted, g)
		}
		srv.Restart(t)
		// Until every node issues above all of them, under a lease claimed
		// after the loss (auto nodes serve counter IDs meanwhile).
		poll.UntilNil(t, time.Minute, "every node past the grants made before the loss", func() error {
			for _, d := range ds {
				info, err := d.Info(ctxT(t))
				if err != nil {
					return err
				}
				if last, _ := strconv.ParseInt(info["tick_last"], 10, 64); last <= granted {
					return fmt.Errorf("%s: mode %s, tick_last %q, not above %d", d.Name, info["mode"], info["tick_last"], granted)
				}
			}
			return nil
		})
		load.WaitFor(t, int64(scale(30_000)), time.Minute, "under the leases claimed after the loss")
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

// 6. Sentinel failover of the Redis master during load.
func TestFleet_SentinelFailover(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	url := "redis-sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName()
	ds := fleet(t, 3, url, "--mode", "auto")
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for range repeats() {
		s.Failover(t)
		load.WaitFor(t, int64(scale(60_000)), 2*time.Minute, "after the failover")
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

// 7. All nodes restarted at once, twice in a row: gracefully, then kill -9.
func TestFleet_AllRestartedAtOnce(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 3, srv.URL())
	defer Watch(t, ds)()
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(30_000)), time.Minute, "warm-up")
	for range repeats() {
		for _, graceful := range []bool{true, false} {
			for _, d := range ds {
				if graceful {
					if err := d.Term(); err != nil {
						t.Fatalf("%s: SIGTERM: %v\n%s", d.Name, err, d.Log())
					}
				} else {
					d.Kill()
				}
			}
			for _, d := range ds {
				d.MustStart()
			}
			load.WaitFor(t, int64(scale(30_000)), time.Minute, "after restarting every node")
		}
	}
	load.Stop()
	load.Check(t, defaultLayout())
}

// 8. The machine-ID space nearly exhausted (2 bits: 3 IDs). A fourth node
// in flake mode refuses clearly; in auto mode it serves counter IDs.
func TestFleet_MachineIDSpaceExhausted(t *testing.T) {
	srv := redisServer(t, false)
	flags := []string{"--bits-machine", "2"}
	ds := fleet(t, 3, srv.URL(), flags...)
	l, err := flake.NewLayout(8, 2, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	refused := NewDaemon(t, "fourth-flake", srv.URL(), flags...)
	err = refused.Start()
	if err == nil || !strings.Contains(err.Error(), "no machine ID") {
		t.Fatalf("a fourth node in flake mode with 3 IDs: %v", err)
	}
	auto := NewDaemon(t, "fourth-auto", srv.URL(), append(flags, "--mode", "auto")...)
	auto.MustStart()
	auto.WaitReady(t, 20*time.Second)
	all := append(ds, auto)
	load := StartLoad(all, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(60_000)), time.Minute, "three flake nodes and one in counter mode")
	load.Stop()
	load.Check(t, l)
	for _, id := range load.IDsOf("fourth-auto") {
		if m := l.Decompose(id).MachineID; m != l.CounterMachineID() {
			t.Fatalf("the node without a machine ID issued %d under machine ID %d", id, m)
		}
	}
}
