package tests

import (
	"context"
	"fmt"
	"math/rand/v2"

	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/poll"
)

// Clients holding blocks (NEXTBLOCK) in the fault suite. A block is
// recorded whole, every ID of it, as soon as the daemon grants it: the
// IDs a client never used (it died, it dropped them at MaxAge) are a gap
// and must never be issued to anyone else. A duplicate shows as an ID of
// one block equal to an ID of another block, of a NEXTIDS batch or of a
// Go client's NextID: Load.Check names both issuers.

// StartBlockLoad opens perDaemon connections to each daemon, each taking
// blocks of 1..maxSize IDs (sizes drawn at random, so blocks are cut at
// different places) until Stop, and records every block's IDs.
func StartBlockLoad(daemons []*Daemon, perDaemon, maxSize int) *Load {
	// Connections numbered apart from StartLoad's.
	return startLoad(daemons, perDaemon, 1000, Request{ReadTimeout: 2 * time.Second, AlternateRESP: true,
		Send: func(ctx context.Context, c *redis.Client, r *rand.Rand) ([]uint64, error) {
			ids, err := takeBlock(ctx, c, 1+r.IntN(maxSize))
			if err == nil {
				time.Sleep(time.Duration(r.IntN(2)) * time.Millisecond) // a client using its block
			}
			return ids, err
		}})
}

// takeBlock sends NEXTBLOCK n on c and returns the block's IDs, decoded
// as docs/protocol.md's reference decoder does.
func takeBlock(ctx context.Context, c *redis.Client, n int) ([]uint64, error) {
	v, err := c.Do(ctx, "NEXTBLOCK", n).Uint64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) < 3 || len(v) == 4 || v[1] < 1 || v[1] > uint64(n) {
		return nil, fmt.Errorf("NEXTBLOCK %d: bad reply %v", n, v)
	}
	b := flake.Block{First: v[0], Count: int64(v[1]), Stride: v[2]}
	if len(v) > 3 {
		b.MachineIDs = v[3:]
	}
	ids := make([]uint64, b.Count)
	for i := range ids {
		ids[i] = b.ID(int64(i))
	}
	return ids, nil
}

// goClients runs a Go client with blocks (Prefetch) on the daemons from
// goroutines until stop is closed, recording every ID it hands out, per
// goroutine (they must strictly increase, across failovers too).
func goClients(t *testing.T, l *Load, daemons []*Daemon, goroutines int, stop chan struct{}) (*client.Client, *sync.WaitGroup) {
	t.Helper()
	var addrs []string
	for _, d := range daemons {
		addrs = append(addrs, d.Addr())
	}
	c, err := client.New(client.Options{Addrs: addrs, Prefetch: 2000, ReadTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []uint64
			flush := func() {
				if len(ids) > 0 {
					l.add(record{daemon: "go-client", mayCounter: true, inc: 1, conn: 2000 + g, ids: ids})
					ids = nil
				}
			}
			defer flush()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				id, err := c.NextID(ctx)
				cancel()
				if err != nil {
					l.errs.Add(1)
					s := "go client: " + err.Error()
					l.lastErr.Store(&s)
					if strings.Contains(err.Error(), "closed") {
						return
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if ids = append(ids, id); len(ids) == 1000 {
					flush()
				}
			}
		}()
	}
	return c, &wg
}

// A client killed mid-block, and a daemon killed -9 with blocks out.
// A client takes a large block and dies having used a few of its IDs;
// then the daemon that granted it is killed and restarted from its state
// file, so nothing but the reservation it wrote before granting remembers
// the block. Fault: the restarted daemon (or anyone) reissuing the gap
// the dead client left. Meanwhile block loads, NEXTIDS loads and a Go
// client with blocks run on every daemon (the Go client fails over).
func TestBlocks_ClientKilledMidBlock_DaemonKilled(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 3, srv.URL(), "--machine-ids", "2")
	load := StartLoad(ds, connsPerDaemon, batch)
	blocks := StartBlockLoad(ds, connsPerDaemon, 3000)
	stop := make(chan struct{})
	gc, gwg := goClients(t, load, ds, 4, stop)
	blocks.WaitFor(t, int64(scale(100_000)), time.Minute, "warm-up")
	for i := range repeats() {
		// The doomed client: one block of 50,000, a few IDs used, the
		// connection dropped.
		doomed := redis.NewClient(&redis.Options{Addr: ds[0].Addr(), PoolSize: 1, DisableIdentity: true})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		gap, err := takeBlock(ctx, doomed, 50_000)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		doomed.Close()
		blocks.add(record{daemon: ds[0].Name + " (doomed client)", inc: 0, conn: 3000 + i, ids: gap})
		t.Logf("a client died holding a block of %d IDs from %s, %d..%d", len(gap), ds[0].Name, gap[0], gap[len(gap)-1])
		ds[0].Kill()
		ds[0].MustStart()
		ds[0].WaitReady(t, 30*time.Second)
		blocks.WaitFor(t, int64(scale(100_000)), time.Minute, "after kill -9 and restart with blocks out")
		load.WaitFor(t, int64(scale(20_000)), time.Minute, "NEXTIDS after the restart")
	}
	close(stop)
	gwg.Wait()
	if err := gc.Close(); err != nil {
		t.Error(err)
	}
	load.Absorb(blocks)
	load.Stop()
	load.Check(t, defaultLayout())
}

// A daemon fenced while blocks are out: its state file is copied and
// started elsewhere while it runs, the copy takes its machine ID over and
// fences it. Fault: the fenced original granting blocks past its
// reservation into ticks the copy issues, or the copy starting below the
// blocks the original granted.
func TestBlocks_DaemonFenced(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 3, srv.URL())
	load := StartBlockLoad(ds, connsPerDaemon, 3000)
	ids := StartLoad(ds, 1, batch)
	load.WaitFor(t, int64(scale(100_000)), time.Minute, "warm-up")
	for i := range repeats() {
		clone := NewDaemon(t, "clone"+strconv.Itoa(i), srv.URL())
		copyFile(t, ds[0].StateFile, clone.StateFile)
		clone.MustStart()
		clone.WaitReady(t, 30*time.Second)
		cl := StartBlockLoad([]*Daemon{clone}, connsPerDaemon, 3000)
		cl.WaitFor(t, int64(scale(50_000)), time.Minute, "the copy's blocks")
		poll.Until(t, 15*time.Second, "the original logs that it was fenced", func() bool {
			return strings.Contains(ds[0].Log(), "lease fenced")
		})
		load.WaitFor(t, int64(scale(100_000)), time.Minute, "the fleet's blocks after the fencing")
		load.Absorb(cl)
		clone.Kill()
	}
	load.Absorb(ids)
	load.Stop()
	load.Check(t, defaultLayout())
}

// Daemons in auto mode switching flake -> counter -> flake (Redis
// unreachable past the reservation, then back) while blocks are out.
// Fault: a switch that does not count the granted blocks as issued, so
// the counter (or the returning generator) starts below them. Blocks are
// taken in both modes.
func TestBlocks_ModeSwitches(t *testing.T) {
	srv := redisServer(t, false)
	// The real flaked init: a registry with the possible loss it records.
	// On one with none recorded (initRegistry) the 5 s pause
	// below passes without a switch to counter mode. A reach of 1 s, which
	// the pause outlasts (the default, 12 s, rides it out).
	if code, out := flakedCmd(t, "init", "--redis", srv.URL(), "--reserve-ahead", "1s"); code != 0 {
		t.Fatalf("flaked init: status %d\n%s", code, out)
	}
	ds := startFleet(t, 3, srv.URL(), "--mode", "auto", "--reserve-ahead", "1s")
	load := StartBlockLoad(ds, connsPerDaemon, 3000)
	ids := StartLoad(ds, 1, batch)
	stop := make(chan struct{})
	gc, gwg := goClients(t, ids, ds, 4, stop)
	load.WaitFor(t, int64(scale(100_000)), time.Minute, "warm-up")
	for range repeats() {
		srv.Pause()
		time.Sleep(5 * time.Second)
		srv.Resume()
		load.WaitFor(t, int64(scale(100_000)), 2*time.Minute, "after Redis is back")
		poll.Until(t, 30*time.Second, "every daemon back in flake mode", func() bool {
			for _, d := range ds {
				if info, err := d.Info(ctxT(t)); err != nil || info["mode"] != "flake" {
					return false
				}
			}
			return true
		})
		load.WaitFor(t, int64(scale(50_000)), time.Minute, "blocks in flake mode again")
	}
	close(stop)
	gwg.Wait()
	if err := gc.Close(); err != nil {
		t.Error(err)
	}
	load.Absorb(ids)
	load.Stop()
	l := defaultLayout()
	counter := 0
	load.mu.Lock()
	for _, r := range load.recs {
		if r.conn > 1000 && r.conn < 2000 && l.Decompose(r.ids[0]).MachineID == l.CounterMachineID() {
			counter++
		}
	}
	load.mu.Unlock()
	if counter == 0 {
		t.Error("no block was granted in counter mode: the switch was not tested")
	}
	t.Logf("%d blocks granted in counter mode", counter)
	load.Check(t, l)
}
