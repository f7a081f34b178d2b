package tests

import (
	"os"
	"slices"
	"testing"
	"time"

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
		{"fresh-registry", func(b *testing.B, srv *redistest.Server, d *Daemon) {
			srv.Flush(b)
			os.Remove(d.StateFile)
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
