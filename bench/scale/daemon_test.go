package scale

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/daemontest"
	"github.com/flaked/flaked/internal/redistest"
)

// daemon is a built flaked serve on a redis-server, started by the test.
type daemon struct {
	addr  string
	redis string // the redis-server's address: INCR there is the reference
	cmd   *exec.Cmd
}

// startDaemon starts flaked serve on srv with the state file at state
// (so each start after the first is a clean restart, reusing its IDs).
func startDaemon(t *testing.T, srv *redistest.Server, state string) *daemon {
	port := redistest.FreePort(t)
	d := &daemon{addr: "127.0.0.1:" + strconv.Itoa(port), redis: srv.Addr()}
	// 64 machine IDs: 1.6M IDs/s at the default layout, so NEXTID never
	// waits for the clock here; room for 10,000 idle clients and probes.
	d.cmd = exec.Command(daemontest.Binary(t), "serve", "--listen", d.addr, "--redis", srv.URL(), "--machine-ids", "64",
		"--max-clients", "20000", "--state-file", state, "--log-level", "warn")
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", d.addr); err == nil {
			_, err := roundTrip(c, bufio.NewReader(c), nextID)
			c.Close()
			if err == nil {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon issues no ID")
		}
	}
}

// stop ends the daemon this test started, by its PID: SIGTERM, a clean
// stop that releases its machine IDs for the next start.
func (d *daemon) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

var (
	nextID = []byte("NEXTID\r\n")
	incr   = []byte("INCR scale:counter\r\n")
)

// roundTrip sends req and reads the integer reply.
func roundTrip(c net.Conn, r *bufio.Reader, req []byte) (time.Duration, error) {
	t0 := time.Now()
	if _, err := c.Write(req); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, ":") {
		return 0, fmt.Errorf("reply %q", line)
	}
	return time.Since(t0), nil
}

// rssMB is the daemon's VmRSS.
func (d *daemon) rssMB(t *testing.T) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// dialIdle opens n connections that send nothing.
func (d *daemon) dialIdle(t *testing.T, n int) []net.Conn {
	conns := make([]net.Conn, 0, n)
	for len(conns) < n {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // the listen backlog is full: retry
			continue
		}
		conns = append(conns, c)
	}
	return conns
}

// active runs n connections to addr doing req round trips (pipeline 1)
// for dur, and returns every latency, sorted.
func active(t *testing.T, addr string, req []byte, n int, dur time.Duration) []time.Duration {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	stop := time.Now().Add(dur)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			var lat []time.Duration
			for time.Now().Before(stop) {
				l, err := roundTrip(c, r, req)
				if err != nil {
					t.Error(err)
					return
				}
				lat = append(lat, l)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(all)
	return all
}

// raiseNoFile lifts the soft limit of open files to the hard one: 10,000
// idle connections are 10,000 descriptors on each side.
func raiseNoFile(t *testing.T) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur < 11_000 {
		t.Skipf("open files limited to %d: 10,000 idle connections need more", l.Cur)
	}
}

// TestScaleDaemon: the built daemon with 1,000 and 10,000 idle
// connections (RSS; p99 of NEXTID from 50 probing connections meanwhile),
// and with 100 and 1,000 active ones (RSS, p50/p99, requests/s), rounds
// alternating the sizes. The load runs in this process, on the same two
// cores as the daemon.
func TestScaleDaemon(t *testing.T) {
	need(t)
	redistest.Require(t)
	raiseNoFile(t)
	srv := redistest.Start(t, redistest.Options{})
	if err := redistest.InitRegistry(context.Background(), srv.Client(t), coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	fmt.Printf("== daemon: load %s before\n", load())
	type idleRes struct{ rss, p50, p99 float64 }
	idle := map[int][]idleRes{}
	act := map[int][]idleRes{}
	rps := map[int][]float64{}
	ref, refRPS := map[int][]idleRes{}, map[int][]float64{}
	var base []float64
	const probe = 3 * time.Second
	for r := range rounds() {
		for _, n := range []int{1000, 10_000} {
			// A fresh daemon for each: Go keeps the memory of connections
			// closed before, and would show the larger size's RSS again.
			d := startDaemon(t, srv, state)
			before := d.rssMB(t)
			base = append(base, before)
			conns := d.dialIdle(t, n)
			time.Sleep(time.Second)
			rss := d.rssMB(t)
			lat := active(t, d.addr, nextID, 50, probe)
			idle[n] = append(idle[n], idleRes{rss - before, float64(pct(lat, 0.5)) / 1e6, float64(pct(lat, 0.99)) / 1e6})
			fmt.Printf("round %d: %d idle connections: RSS %.1f MB (%.1f MB before), NEXTID from 50 more: p50 %s ms p99 %s ms\n",
				r+1, n, rss, before, ms(pct(lat, 0.5)), ms(pct(lat, 0.99)))
			for _, c := range conns {
				c.Close()
			}
			d.stop()
		}
		d := startDaemon(t, srv, state)
		for _, n := range []int{100, 1000} {
			lat := active(t, d.addr, nextID, n, 5*time.Second)
			rss := d.rssMB(t)
			act[n] = append(act[n], idleRes{rss, float64(pct(lat, 0.5)) / 1e6, float64(pct(lat, 0.99)) / 1e6})
			rps[n] = append(rps[n], float64(len(lat))/5)
			fmt.Printf("round %d: %d active connections: %.0f req/s, p50 %s ms p99 %s ms, RSS %.1f MB after\n",
				r+1, n, float64(len(lat))/5, ms(pct(lat, 0.5)), ms(pct(lat, 0.99)), rss)
			time.Sleep(time.Second)
			// The same load on redis-server INCR: what the load generator
			// and the two cores allow any server.
			lat = active(t, d.redis, incr, n, 5*time.Second)
			ref[n] = append(ref[n], idleRes{0, float64(pct(lat, 0.5)) / 1e6, float64(pct(lat, 0.99)) / 1e6})
			refRPS[n] = append(refRPS[n], float64(len(lat))/5)
			fmt.Printf("round %d: %d active connections, redis-server INCR: %.0f req/s, p50 %s ms p99 %s ms\n",
				r+1, n, float64(len(lat))/5, ms(pct(lat, 0.5)), ms(pct(lat, 0.99)))
			time.Sleep(time.Second)
		}
		d.stop()
	}
	fmt.Printf("== daemon: load %s after; RSS of a daemon with no client %.1f MB (median)\n", load(), median(base))
	col := func(v []idleRes, f func(idleRes) float64) float64 {
		var out []float64
		for _, x := range v {
			out = append(out, f(x))
		}
		return median(out)
	}
	rss := func(x idleRes) float64 { return x.rss }
	p50 := func(x idleRes) float64 { return x.p50 }
	p99 := func(x idleRes) float64 { return x.p99 }
	fmt.Println("| connections | RSS growth from no client (per connection) | NEXTID p50 | NEXTID p99 | requests/s |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, n := range []int{1000, 10_000} {
		fmt.Printf("| %d idle (+50 probing) | %.1f MB (%.2f KB) | %.2f ms | %.2f ms | |\n", n, col(idle[n], rss),
			col(idle[n], rss)*1024/float64(n), col(idle[n], p50), col(idle[n], p99))
	}
	for _, n := range []int{100, 1000} {
		fmt.Printf("| %d active | RSS %.1f MB | %.2f ms | %.2f ms | %.0f |\n", n, col(act[n], rss), col(act[n], p50), col(act[n], p99), median(rps[n]))
		fmt.Printf("| %d active, redis-server INCR (reference) | | %.2f ms | %.2f ms | %.0f |\n", n, col(ref[n], p50), col(ref[n], p99), median(refRPS[n]))
	}
	// The bound: an idle connection costs the daemon the same memory at
	// 1,000 and 10,000 connections. (Latency and throughput are speed:
	// reported beside redis-server's, not asserted.)
	var small, large []float64
	for i := range min(len(idle[1000]), len(idle[10_000])) {
		small, large = append(small, idle[1000][i].rss), append(large, idle[10_000][i].rss)
	}
	checkLinear(t, "daemon RSS of the idle connections", perUnitRatios(small, large, 1000, 10_000))
}
