package tests

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

// What each uniqueness guard costs a node before its first ID: process
// start to the first NEXTID reply, with the guards as they are. The
// figures are in BENCHMARKS.md ("What the guards cost").
//
//	go test -run '^$' -bench FirstID -benchtime 3x ./tests/
func BenchmarkFirstID(b *testing.B) {
	redistest.Require(b)
	cases := []struct {
		name string
		// before runs with the daemon stopped (after a first start that
		// made the registry) and sets up the fault.
		before func(b *testing.B, srv *redistest.Server, d *Daemon)
		// crash: the previous incarnation is killed, not stopped.
		crash bool
	}{
		// A new fleet: flaked init (its wait, once per fleet, is not
		// timed), then the node's first start.
		{"new-fleet-after-init", func(b *testing.B, srv *redistest.Server, d *Daemon) {
			srv.Flush(b)
			os.Remove(d.StateFile)
			d.InitRegistry()
		}, false},
		{"restart-after-clean-stop", nil, false},
		{"restart-after-kill", nil, true},
		{"copy-of-a-live-node", nil, false}, // measured on the copy
		{"after-redis-restart", func(b *testing.B, srv *redistest.Server, d *Daemon) {
			srv.Kill()
			srv.Restart(b)
		}, false},
		{"new-node-after-redis-restart", func(b *testing.B, srv *redistest.Server, d *Daemon) {
			srv.Kill()
			srv.Restart(b)
			os.Remove(d.StateFile)
		}, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b, redistest.Options{AOF: true})
			d := NewDaemon(b, "guards", srv.URL())
			d.InitRegistry()
			var took []time.Duration
			for range b.N {
				b.StopTimer()
				d.MustStart()
				if err := firstID(d, 30*time.Second); err != nil {
					b.Fatal(err)
				}
				target := d
				switch {
				case tc.name == "copy-of-a-live-node":
					target = NewDaemon(b, "copy", srv.URL())
					copyFile(b, d.StateFile, target.StateFile)
				case tc.crash:
					d.Kill()
				default:
					if err := d.Term(); err != nil {
						b.Fatal(err)
					}
				}
				if tc.before != nil {
					tc.before(b, srv, d)
				}
				b.StartTimer()
				began := time.Now()
				if err := target.startNoWait(); err != nil {
					b.Fatal(err)
				}
				if err := firstID(target, 30*time.Second); err != nil {
					b.Fatalf("%v\n%s", err, target.Log())
				}
				took = append(took, time.Since(began))
				b.StopTimer()
				target.Kill()
				d.Kill()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// What a Redis restart costs a node that keeps running through it: a
// client asks for one ID after another while redis-server is killed and
// restarted (AOF, appendfsync always: nothing is lost, but Redis cannot
// tell). A lease is not extended across a possible loss:
// the node claims again and waits for the loss floor. Reported: the
// longest wait for one ID (ms), the time from the restart to the first
// flake-mode ID (ms), and the counter-mode IDs served meanwhile (auto).
//
//	go test -run '^$' -bench ThroughRedisRestart -benchtime 3x ./tests/
func BenchmarkThroughRedisRestart(b *testing.B) {
	redistest.Require(b)
	lay := flake.DefaultLayout()
	for _, mode := range []string{"flake", "auto"} {
		b.Run(mode, func(b *testing.B) {
			srv := redistest.Start(b, redistest.Options{AOF: true})
			initRegistry(b, "--redis", srv.URL())
			var gaps, backs, counters []float64
			for range b.N {
				b.StopTimer()
				d := NewDaemon(b, "through-"+mode, srv.URL(), "--mode", mode)
				d.MustStart()
				rdb := goRedisTB(b, d)
				if err := firstID(d, 30*time.Second); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				type served struct {
					at      time.Time
					counter bool
				}
				var restarted time.Time
				var ids []served // after the restart
				var last time.Time
				var gap, back time.Duration
				start := time.Now()
				for time.Since(start) < 15*time.Second {
					if restarted.IsZero() && time.Since(start) > 2*time.Second {
						srv.Kill()
						srv.Restart(b)
						restarted = time.Now()
					}
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					id, err := rdb.Do(ctx, "NEXTID").Uint64()
					cancel()
					now := time.Now()
					if err != nil {
						continue
					}
					if !last.IsZero() && now.Sub(last) > gap {
						gap = now.Sub(last)
						if !restarted.IsZero() {
							back = now.Sub(restarted) // flake mode: the end of the stall
						}
					}
					last = now
					if !restarted.IsZero() {
						ids = append(ids, served{now, lay.Decompose(id).MachineID == lay.CounterMachineID()})
					}
				}
				// Auto mode: the first flake ID after the last counter one.
				nCounter, lastCounter := 0, -1
				for i, s := range ids {
					if s.counter {
						nCounter, lastCounter = nCounter+1, i
					}
				}
				if lastCounter >= 0 && lastCounter+1 < len(ids) {
					back = ids[lastCounter+1].at.Sub(restarted)
				}
				b.StopTimer()
				rdb.Close()
				d.Kill()
				gaps = append(gaps, float64(gap.Microseconds())/1000)
				backs = append(backs, float64(back.Microseconds())/1000)
				counters = append(counters, float64(nCounter))
			}
			b.ReportMetric(median(gaps), "max-wait-ms")
			b.ReportMetric(median(backs), "flake-again-ms")
			b.ReportMetric(median(counters), "counter-ids")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
