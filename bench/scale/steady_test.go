package scale

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// steadyWindow is FLAKED_SCALE_WINDOW, default 20 s.
func steadyWindow() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FLAKED_SCALE_WINDOW")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}

// steady is one window of a fleet's steady state.
type steady struct {
	n                   int
	commands, scripts   float64 // per second
	cpu                 float64 // Redis CPU seconds per second
	ids                 int64
	counterNodes, calls string
}

// runFleet starts n nodes at once, each with its own go-redis client (one
// in ten in counter mode), lets each issue 10 IDs a second, and measures
// Redis over the window once all are started. The nodes stop cleanly at
// the end.
func runFleet(t *testing.T, srv *redistest.Server, admin *redis.Client, n int, window time.Duration) steady {
	ctx := context.Background()
	nodes := make([]*node.Node, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mode := node.ModeFlake
			if i%10 == 9 {
				mode = node.ModeCounter
			}
			rdb := nodeClient(srv)
			nd, err := node.New(ctx, node.Options{Redis: rdb, Mode: mode, Logger: zerolog.Nop(),
				Registry: coord.Options{Owner: coord.Owner{Host: fmt.Sprintf("node-%d", i), PID: 1000 + i}}})
			if err != nil {
				errs <- err
				rdb.Close()
				return
			}
			nodes[i] = nd
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var issued sync.WaitGroup
	counts := make([]int64, n)
	for i, nd := range nodes {
		issued.Add(1)
		go func() {
			defer issued.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := nd.NextID(ctx); err == nil {
						counts[i]++
					}
				}
			}
		}()
	}
	time.Sleep(3 * time.Second) // every node past its first reservation
	before := stats(t, admin)
	time.Sleep(window)
	after := stats(t, admin)
	close(stop)
	issued.Wait()
	var ids int64
	for i, nd := range nodes {
		ids += counts[i]
		if err := nd.Close(ctx); err != nil {
			t.Errorf("node %d: close: %v", i, err)
		}
	}
	sec := window.Seconds()
	return steady{n: n, commands: float64(after.commands-before.commands) / sec,
		scripts: float64(after.calls["evalsha"]-before.calls["evalsha"]) / sec,
		cpu:     (after.cpu - before.cpu) / sec, ids: ids, calls: callsSince(before, after)}
}

// TestScaleSteady: 100 and 1,000 live nodes, rounds alternating; Redis
// commands/s and CPU per 1,000 nodes over a fixed window.
func TestScaleSteady(t *testing.T) {
	need(t)
	srv, admin := agedRegistry(t)
	window := steadyWindow()
	fmt.Printf("== steady: load %s before, window %v\n", load(), window)
	sizes := []int{100, 1000}
	res := map[int][]steady{}
	for r := range rounds() {
		for _, n := range sizes {
			s := runFleet(t, srv, admin, n, window)
			res[n] = append(res[n], s)
			fmt.Printf("round %d: %d nodes: %.0f commands/s, %.1f scripts/s, Redis CPU %.2f%% of a core (%s)\n",
				r+1, n, s.commands, s.scripts, s.cpu*100, s.calls)
		}
	}
	fmt.Printf("== steady: load %s after\n", load())
	fmt.Println("| live nodes | Redis commands/s | scripts (EVALSHA)/s | Redis CPU (% of a core) | commands/s per 1,000 nodes | CPU per 1,000 nodes |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	for _, n := range sizes {
		var c, s, cpu []float64
		for _, x := range res[n] {
			c, s, cpu = append(c, x.commands), append(s, x.scripts), append(cpu, x.cpu)
		}
		k := 1000 / float64(n)
		fmt.Printf("| %d | %.0f | %.1f | %.2f%% | %.0f | %.2f%% |\n", n, median(c), median(s), median(cpu)*100,
			median(c)*k, median(cpu)*k*100)
	}
	// The bounds: a live node costs Redis the same at either fleet size
	// (its renewals and reservations), so commands and CPU per node stay
	// within linearFactor.
	var smallC, largeC, smallCPU, largeCPU []float64
	for i := range min(len(res[100]), len(res[1000])) {
		smallC, largeC = append(smallC, res[100][i].commands), append(largeC, res[1000][i].commands)
		smallCPU, largeCPU = append(smallCPU, res[100][i].cpu), append(largeCPU, res[1000][i].cpu)
	}
	checkLinear(t, "Redis commands/s of the live nodes", perUnitRatios(smallC, largeC, 100, 1000))
	checkLinear(t, "Redis CPU of the live nodes", perUnitRatios(smallCPU, largeCPU, 100, 1000))
}
