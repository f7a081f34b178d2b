package scale

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// massStart is one mass start: n nodes claim at once.
type massStart struct {
	n        int
	last     time.Duration // gate open to the last node holding an ID
	p50, p99 time.Duration // claim latency, dial included
	redisCPU float64       // seconds
	scripts  float64       // EVALSHA calls per node
	calls    string
}

// startNodes opens the gate for n nodes, each with its own go-redis
// client (a restarted process dials anew), claiming one machine ID, and
// releases them all afterwards (the next deploy). It fails on an error or
// a machine ID held by two live leases.
func startNodes(t *testing.T, srv *redistest.Server, admin *redis.Client, n int) massStart {
	ctx := context.Background()
	regs := make([]*coord.Registry, n)
	clients := make([]*redis.Client, n)
	for i := range n {
		clients[i] = nodeClient(srv)
		var err error
		regs[i], err = coord.NewRegistry(clients[i], coord.Options{Owner: coord.Owner{Host: fmt.Sprintf("node-%d", i), PID: 1000 + i}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if os.Getenv("FLAKED_SCALE_PREDIAL") != "" {
		// Connections made before the gate: what the claims cost without
		// 1,000 connections being accepted at once.
		for _, c := range clients {
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	leases := make([]*coord.Lease, n)
	lat, done := make([]time.Duration, n), make([]time.Duration, n)
	var start time.Time
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			t0 := time.Now()
			leases[i], errs[i] = regs[i].Claim(ctx, coord.ClaimOptions{})
			lat[i], done[i] = time.Since(t0), time.Since(start)
		}()
	}
	before := stats(t, admin)
	start = time.Now()
	close(gate)
	wg.Wait()
	after := stats(t, admin)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
	}
	held := map[int]int{}
	for i, l := range leases {
		id := l.MachineIDs()[0]
		if j, dup := held[id]; dup {
			t.Fatalf("machine ID %d held by the live leases of nodes %d and %d", id, j, i)
		}
		held[id] = i
	}
	slices.Sort(lat)
	res := massStart{n: n, last: slices.Max(done), p50: pct(lat, 0.5), p99: pct(lat, 0.99),
		redisCPU: after.cpu - before.cpu, scripts: float64(after.calls["evalsha"]-before.calls["evalsha"]) / float64(n),
		calls: callsSince(before, after)}
	for i, l := range leases {
		if err := l.Release(ctx, l.Floor()); err != nil {
			t.Fatal(err)
		}
		clients[i].Close()
	}
	return res
}

// TestScaleClaims: 100 and 1,000 nodes start at once on one redis-server,
// as after a deploy restarts a fleet, rounds alternating the sizes. The
// registry exists (the first claim, which waits for the new registry's
// horizon, is made before), and each round's nodes stop cleanly before
// the next, so the registry holds the released IDs of earlier rounds.
func TestScaleClaims(t *testing.T) {
	need(t)
	srv, admin := agedRegistry(t)
	fmt.Printf("== claims: load %s before\n", load())
	sizes := []int{100, 1000}
	res := map[int][]massStart{}
	var growth []float64
	for r := range rounds() {
		var last [2]time.Duration
		for i, n := range sizes {
			m := startNodes(t, srv, admin, n)
			res[n] = append(res[n], m)
			last[i] = m.last
			fmt.Printf("round %d: %d nodes: last holds an ID after %s ms, claim p50 %s ms p99 %s ms, Redis CPU %.3f s, %.2f scripts per node (%s)\n",
				r+1, n, ms(m.last), ms(m.p50), ms(m.p99), m.redisCPU, m.scripts, m.calls)
		}
		growth = append(growth, float64(last[1])/float64(last[0]))
	}
	fmt.Printf("== claims: load %s after\n", load())
	fmt.Println("| nodes starting at once | time until the last holds an ID | claim p50 | claim p99 | Redis CPU | Redis CPU per node | scripts per node |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range sizes {
		var last, p50, p99, cpu, scripts []float64
		for _, m := range res[n] {
			last = append(last, m.last.Seconds()*1e3)
			p50 = append(p50, m.p50.Seconds()*1e3)
			p99 = append(p99, m.p99.Seconds()*1e3)
			cpu = append(cpu, m.redisCPU)
			scripts = append(scripts, m.scripts)
		}
		fmt.Printf("| %d | %.0f ms | %.1f ms | %.1f ms | %.3f s | %.0f µs | %.2f |\n", n, median(last), median(p50), median(p99),
			median(cpu), median(cpu)/float64(n)*1e6, median(scripts))
	}
	fmt.Printf("growth of the time to the last, 100 -> 1,000 nodes (10x the nodes): %.2fx (rounds: %s)\n", median(growth), fmtList(growth))
	// The bounds: a claim's cost to Redis does not depend on how many
	// nodes claim at once, so its CPU and its script calls per node stay
	// within linearFactor. (The time until the last holds an ID is
	// latency on a shared machine, 1,000 connections accepted at once
	// included: reported, not asserted.)
	series := func(f func(massStart) float64) (small, large []float64) {
		for i := range min(len(res[100]), len(res[1000])) {
			small, large = append(small, f(res[100][i])), append(large, f(res[1000][i]))
		}
		return small, large
	}
	s, l := series(func(m massStart) float64 { return m.redisCPU })
	checkLinear(t, "Redis CPU of the claims", perUnitRatios(s, l, 100, 1000))
	s, l = series(func(m massStart) float64 { return m.scripts * float64(m.n) })
	checkLinear(t, "scripts run for the claims", perUnitRatios(s, l, 100, 1000))
}
