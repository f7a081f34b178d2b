package tests

import (
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// Start-up: process start to the first ID served (the first NEXTID reply
// on a fresh connection), with a local redis-server and standalone. Each
// iteration starts the built binary and stops it with SIGTERM (a clean
// stop, so the next start reuses the machine ID at once, as a rolling
// restart does). The registry is made (as a new fleet's, no loss floor)
// and a first run takes its machine ID before the timer starts.
//
//	go test -run '^$' -bench Startup -benchtime 20x ./tests/
func BenchmarkStartup_Redis(b *testing.B) {
	redistest.Require(b)
	srv := redistest.Start(b, redistest.Options{})
	d := NewDaemon(b, "startup", srv.URL())
	d.InitRegistry()
	d.MustStart()
	c := goRedisTB(b, d)
	for {
		if _, err := c.Do(ctxT(b), "NEXTID").Uint64(); err == nil {
			break
		}
	}
	c.Close()
	if err := d.Term(); err != nil {
		b.Fatal(err)
	}
	benchStartup(b, d)
}

func BenchmarkStartup_Standalone(b *testing.B) {
	d := NewDaemon(b, "startup-standalone", "")
	d.Args = nil // no --redis: the embedded store
	benchStartup(b, d)
}

func benchStartup(b *testing.B, d *Daemon) {
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		began := time.Now()
		if err := d.startNoWait(); err != nil {
			b.Fatal(err)
		}
		if err := firstID(d, 10*time.Second); err != nil {
			b.Fatalf("%v\n%s", err, d.Log())
		}
		took = append(took, time.Since(began))
		b.StopTimer()
		if err := d.Term(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}

// firstID dials until the port accepts and sends NEXTID until it gets an
// integer, without a client library's set-up in the way.
func firstID(d *Daemon, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", d.Addr(), 100*time.Millisecond)
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("NEXTID\r\n"))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Close()
		if n > 1 && buf[0] == ':' {
			if _, err := strconv.ParseUint(string(buf[1:n-2]), 10, 64); err == nil {
				return nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return errTimeout
}

type timeoutError struct{}

func (timeoutError) Error() string { return "no ID served in time" }

var errTimeout = timeoutError{}
