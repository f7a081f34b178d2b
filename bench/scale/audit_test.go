package scale

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/audit"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/daemontest"
	"github.com/flaked/flaked/internal/redistest"
)

const totalEvents = 100_000

// auditFleet is a redis-server holding a registry of ids machine IDs (ids
// / 1,000 leases of 1,000, claimed through coord) and 100,000 events.
type auditFleet struct {
	ids      int
	srv      *redistest.Server
	rdb      *redis.Client
	perID    float64 // Redis bytes per registered machine ID
	perEvent float64 // Redis bytes per event
}

// newAuditFleet claims the IDs as a fleet would: 1,000 per lease, 4 leases
// at a time. Then it measures Redis memory per ID (the stream trimmed
// away) and per event (the claim events written back, mode events after
// them up to 100,000).
func newAuditFleet(t *testing.T, ids int) *auditFleet {
	f := &auditFleet{ids: ids, srv: redistest.Start(t, redistest.Options{})}
	f.rdb = f.srv.Client(t)
	ctx := context.Background()
	if err := redistest.InitRegistry(ctx, f.rdb, coord.DefaultNamespace, flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	m0 := stats(t, f.rdb).memory
	var wg sync.WaitGroup
	errs := make(chan error, ids/1000)
	sem := make(chan struct{}, 4)
	for i := range ids / 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			reg, err := coord.NewRegistry(f.rdb, coord.Options{Horizon: time.Millisecond,
				LeaseTTL: coord.MaxLeaseTTL, Owner: coord.Owner{Host: "web-" + strconv.Itoa(i), PID: 1000 + i, Addr: "10.0.0.1:7379", Version: "scale"}})
			if err == nil {
				_, err = reg.Claim(ctx, coord.ClaimOptions{Count: 1000})
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	k := contract.NewKeys(contract.DefaultNamespace)
	claims, err := f.rdb.XRange(ctx, k.Events, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	f.rdb.XTrimMaxLen(ctx, k.Events, 0)
	m1 := stats(t, f.rdb).memory
	f.perID = float64(m1-m0) / float64(ids)
	p := f.rdb.Pipeline()
	for _, m := range claims {
		p.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, Values: m.Values})
	}
	for i := len(claims); i < totalEvents; i++ {
		mid := strconv.Itoa(i % ids)
		p.XAdd(ctx, &redis.XAddArgs{Stream: k.Events, Values: []any{contract.FieldType, contract.EventMode, contract.FieldMachineID, mid,
			contract.FieldToken, "0123456789abcdef0123456789abcdef", contract.FieldHost, "web-" + strconv.Itoa(i%60), contract.FieldPID, "1000",
			contract.FieldAddr, "10.0.0.1:7379", contract.FieldFrom, "flake", contract.FieldTo, "counter", contract.FieldReason, "scale filler"}})
		if i%5000 == 0 {
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	f.perEvent = float64(stats(t, f.rdb).memory-m1) / totalEvents
	return f
}

// run is one flaked audit command against the fleet: wall time, CPU
// time of the process (user + system) and its peak RSS.
type run struct {
	wall, cpu time.Duration
	rssKB     int64
	redisCPU  float64 // seconds of redis-server CPU during the command
}

func (f *auditFleet) run(t *testing.T, args ...string) run {
	bin := daemontest.Binary(t)
	// --redis after the (sub)command, before a positional argument:
	// urfave/cli reads no flag after one.
	full := slices.Clone(args)
	at := len(full)
	if last := full[len(full)-1]; last[0] >= '0' && last[0] <= '9' {
		at--
	}
	full = slices.Insert(full, at, "--redis", f.srv.URL())
	cmd := exec.Command(bin, full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	before := stats(t, f.rdb)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The peak RSS from /proc while it runs: wait4's ru_maxrss would count
	// the image of this process, from which the child was forked.
	hwm, done := make(chan int64), make(chan struct{})
	go func() {
		var peak int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, vmHWM(cmd.Process.Pid))
			select {
			case <-done:
				hwm <- peak
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	rssKB := <-hwm
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 && args[0] == "whois" {
		err = nil // no owner for that tick: the answer says why, the time is what counts
	}
	if err != nil {
		t.Fatalf("flaked %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	if args[len(args)-1] == "verify" {
		want := fmt.Sprintf("%d machine IDs, %d events checked", f.ids, totalEvents)
		if !strings.Contains(out.String(), want) {
			t.Fatalf("verify: %q, want %q", out.String(), want)
		}
	}
	return run{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), rssKB: rssKB,
		redisCPU: stats(t, f.rdb).cpu - before.cpu}
}

// vmHWM is the peak RSS of process pid in KB, 0 once it is gone.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// heldMB is the Go heap a snapshot of the fleet holds, read in process.
func (f *auditFleet) heldMB(t *testing.T) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := audit.Read(context.Background(), f.rdb, "")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(s.Records) != f.ids || len(s.Events) != totalEvents {
		t.Fatalf("read %d IDs and %d events", len(s.Records), len(s.Events))
	}
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / 1e6
}

// TestScaleAudit: flaked audit, verify, --json, history, whois and prune
// (a dry run) at 6,000 and 60,000 machine IDs with 100,000 events, rounds
// alternating the sizes.
func TestScaleAudit(t *testing.T) {
	need(t)
	redistest.Require(t)
	small, large := newAuditFleet(t, 6_000), newAuditFleet(t, 60_000)
	fleets := []*auditFleet{small, large}
	l := flake.DefaultLayout()
	id, err := l.Compose(l.Tick(time.Now()), 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{{"audit"}, {"audit", "verify"}, {"audit", "--json"}, {"audit", "history", "5"}, {"whois", strconv.FormatUint(id, 10)},
		{"audit", "prune", "--older-than", "720h", "--dry-run"}}
	wall := map[string][]float64{} // "cmd/ids" -> seconds per round
	cpu := map[string][]float64{}
	rss := map[string][]float64{}
	rcpu := map[string][]float64{}
	ratio := map[string][]float64{}
	fmt.Printf("== audit: load %s before\n", load())
	for r := range rounds() {
		for _, c := range cmds {
			var w [2]float64
			for i, f := range fleets {
				key := fmt.Sprintf("%s/%d", strings.Join(c, " "), f.ids)
				res := f.run(t, c...)
				w[i] = res.wall.Seconds()
				wall[key] = append(wall[key], res.wall.Seconds())
				cpu[key] = append(cpu[key], res.cpu.Seconds())
				rss[key] = append(rss[key], float64(res.rssKB)/1024)
				rcpu[key] = append(rcpu[key], res.redisCPU)
				fmt.Printf("round %d: flaked %s, %d IDs: %.3f s wall, %.3f s CPU, peak RSS %.1f MB, redis-server CPU %.3f s\n",
					r+1, strings.Join(c, " "), f.ids, res.wall.Seconds(), res.cpu.Seconds(), float64(res.rssKB)/1024, res.redisCPU)
			}
			ratio[strings.Join(c, " ")] = append(ratio[strings.Join(c, " ")], w[1]/w[0])
		}
	}
	fmt.Printf("== audit: load %s after\n", load())
	fmt.Println("| command | 6,000 IDs: wall / CPU / peak RSS / Redis CPU | 60,000 IDs: wall / CPU / peak RSS / Redis CPU | growth of wall time (median of per-round ratios) |")
	fmt.Println("|---|---:|---:|---:|")
	for _, c := range cmds {
		name := strings.Join(c, " ")
		cell := func(ids int) string {
			key := fmt.Sprintf("%s/%d", name, ids)
			return fmt.Sprintf("%.3f s / %.3f s / %.0f MB / %.3f s", median(wall[key]), median(cpu[key]), median(rss[key]), median(rcpu[key]))
		}
		fmt.Printf("| `flaked %s` | %s | %s | %.2fx (%s) |\n", name, cell(6_000), cell(60_000), median(ratio[name]), fmtList(ratio[name]))
	}
	fmt.Printf("| Go heap a snapshot holds (audit.Read, in process) | %.1f MB | %.1f MB | %.2fx |\n",
		small.heldMB(t), large.heldMB(t), large.heldMB(t)/small.heldMB(t))
	fmt.Printf("| Redis memory per registered machine ID (lease, owner hash, set member, reservation) | %.0f B | %.0f B | |\n", small.perID, large.perID)
	fmt.Printf("| Redis memory per event (claim events, then mode events) | %.0f B | %.0f B | |\n", small.perEvent, large.perEvent)
	// The bounds: each command's wall time grows at most linearly with the
	// machine IDs (ratio[name] is already large over small per round), and
	// Redis memory per machine ID stays flat.
	for _, c := range cmds {
		name := strings.Join(c, " ")
		var perID []float64
		for _, r := range ratio[name] {
			perID = append(perID, r/10)
		}
		checkLinear(t, "wall time of flaked "+name, perID)
	}
	checkLinear(t, "Redis memory of the registry", []float64{large.perID / small.perID})
}

func fmtList(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, strconv.FormatFloat(x, 'f', 2, 64))
	}
	return strings.Join(parts, ", ")
}
