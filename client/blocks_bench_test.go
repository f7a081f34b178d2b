package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// wideLayout is the blocks benchmark's layout: 20 sequence bits (104.9M
// IDs/s per machine ID, as the core benchmarks), so that the ID space is
// not what is measured; the node and the embedded generator may run 10
// minutes ahead of the clock, so neither waits for ticks.
var wideLayout = func() flake.Layout {
	l, err := flake.NewLayout(20, 8, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		panic(err)
	}
	return l
}()

const wideLead = 10 * time.Minute

// blockRuns are the ns/ID of each row per round (blockRound): the
// benchmark runs its rows in rounds, one row after the other, so that a
// noisy spell of the machine touches every row alike (-count would repeat
// each row in a row). A row called with growing b.N keeps its last,
// longest run of the round.
var (
	blockRunsMu sync.Mutex
	blockRuns   = map[string]map[int]float64{}
	blockAllocs = map[string]float64{} // per ID, the last round's
	blockOrder  []string
	blockRound  int
)

// blockRounds is how many rounds: BLOCK_ROUNDS, default 5.
func blockRounds() int {
	if n, err := strconv.Atoi(os.Getenv("BLOCK_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// BenchmarkClientBlocks measures, side by side in one run (rows alternate
// in BLOCK_ROUNDS rounds, default 5; run it with -count 1), the client's NextID served from blocks (NEXTBLOCK)
// against the embedded flake generator's NextID, the NEXTIDS prefetch
// (a mutex-guarded buffer) and plain INCR (go-redis to redis-server), at
// 1, 32 and 256 goroutines; and the daemon's IDs per second through
// NEXTBLOCK against NEXTIDS 100, one request at a time. ns/op is per ID
// (per request for the daemon rows, which report IDs/s); allocs/op per
// ID. The block clients' Stats (the block size they reached, the calls
// that waited for a block) are printed under the table.
//
//	go test -run '^$' -bench BenchmarkClientBlocks -benchtime 1s -count 1 ./client/
func BenchmarkClientBlocks(b *testing.B) {
	f := newFleet(b)
	f.init(b, wideLayout)
	n, err := node.New(idtest.Context(b, 30*time.Second), node.Options{
		Redis: f.rdb, MaxLead: wideLead, Registry: coord.Options{Layout: wideLayout},
		StateFile: filepath.Join(b.TempDir(), "node.state"),
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := n.NextID(idtest.Context(b, 30*time.Second)); err != nil {
		b.Fatal(err)
	}
	d := serveNode(b, n, server.Options{MaxBatch: 1_000_000})
	gen, err := flake.New(flake.Settings{BitsSequence: 20, BitsMachineID: 8, MachineID: 1, MaxLead: wideLead})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()

	base := client.Options{Addrs: []string{d.addr}, PoolSize: 64, MaxBatch: 1_000_000}
	blocks := base
	blocks.Prefetch = 1_000_000
	mutex := base
	mutex.Prefetch = 10_000
	clients := map[string]*client.Client{}
	for _, g := range blockGoroutines {
		clients[fmt.Sprint("block", g)] = newClient(b, blocks)
		clients[fmt.Sprint("mutex", g)] = newClient(b, client.WithNEXTIDSPrefetch(mutex))
	}
	ropts, err := client.RedisOptions(f.redis.Addr(), base)
	if err != nil {
		b.Fatal(err)
	}
	incr := redis.NewClient(ropts)
	defer incr.Close()
	dopts, _ := client.RedisOptions(d.addr, base)
	raw := redis.NewClient(dopts)
	defer raw.Close()

	ctx := context.Background()
	for round := 1; round <= blockRounds(); round++ {
		blockRunsMu.Lock()
		blockRound = round
		blockRunsMu.Unlock()
		for _, g := range blockGoroutines {
			bc, mc := clients[fmt.Sprint("block", g)], clients[fmt.Sprint("mutex", g)]
			for _, row := range []struct {
				name string
				op   func() error
			}{
				{"embedded-flake-NextID", func() error { _, err := gen.NextID(); return err }},
				{"client-NextID-block", func() error { _, err := bc.NextID(ctx); return err }},
				{"client-NextID-prefetch-NEXTIDS-10000", func() error { _, err := mc.NextID(ctx); return err }},
				{"go-redis-INCR", func() error { return incr.Incr(ctx, "bench:incr").Err() }},
			} {
				name := fmt.Sprintf("%s/g=%d", row.name, g)
				runtime.GC() // no row pays for the garbage of the one before
				b.Run(name, func(b *testing.B) { runIDs(b, name, g, row.op) })
			}
		}
		// The daemon, one request at a time: IDs per second.
		for _, row := range []struct {
			name string
			n    int64
			cmd  string
		}{
			{"daemon-NEXTIDS-100", 100, "nextids"},
			{"daemon-NEXTBLOCK-100", 100, "nextblock"},
			{"daemon-NEXTBLOCK-10000", 10_000, "nextblock"},
		} {
			runtime.GC()
			b.Run(row.name, func(b *testing.B) {
				b.ReportAllocs()
				ids := int64(0)
				start := time.Now()
				for b.Loop() {
					v, err := raw.Do(ctx, row.cmd, row.n).Int64Slice()
					if err != nil {
						b.Fatal(err)
					}
					if row.cmd == "nextids" {
						ids += int64(len(v))
					} else {
						ids += v[1]
					}
				}
				perSec := float64(ids) / time.Since(start).Seconds()
				b.ReportMetric(perSec, "IDs/s")
				record(row.name, 1e9/perSec) // ns per ID
			})
		}
	}
	blocksTable()
	for _, g := range blockGoroutines {
		st := clients[fmt.Sprint("block", g)].Stats()
		fmt.Printf("client-NextID-block/g=%d: block size %d, %d IDs prefetched, %d expired, %d calls waited for a block\n",
			g, st.BlockSize, st.Prefetched, st.Expired, st.Waits)
	}
}

// blockGoroutines are the rows' goroutine counts: g > 1 is RunParallel
// with g/GOMAXPROCS goroutines per CPU.
var blockGoroutines = []int{1, 32, 256}

// runIDs runs op b.N times from g goroutines (RunParallel with g/GOMAXPROCS
// per CPU for g > 1) and records ns per ID.
func runIDs(b *testing.B, name string, g int, op func() error) {
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	if g == 1 {
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	record(name, float64(elapsed.Nanoseconds())/float64(b.N))
	blockRunsMu.Lock()
	blockAllocs[name] = float64(m1.Mallocs-m0.Mallocs) / float64(b.N)
	blockRunsMu.Unlock()
}

// record keeps the final run (the one at the full -benchtime) of each
// count: a benchmark without b.Loop runs with growing b.N, so each call
// replaces the previous one of the same count.
func record(name string, nsPerID float64) {
	blockRunsMu.Lock()
	defer blockRunsMu.Unlock()
	if _, ok := blockRuns[name]; !ok {
		blockOrder = append(blockOrder, name)
		blockRuns[name] = map[int]float64{}
	}
	blockRuns[name][blockRound] = nsPerID
}

// blocksTable prints the medians over the rounds, and their ratios.
func blocksTable() {
	blockRunsMu.Lock()
	defer blockRunsMu.Unlock()
	med := map[string]float64{}
	counts := 0
	for _, name := range blockOrder {
		var v []float64
		for _, ns := range blockRuns[name] {
			v = append(v, ns)
		}
		counts = max(counts, len(v))
		slices.Sort(v)
		med[name] = v[len(v)/2]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nblocks: %d CPUs, GOMAXPROCS %d, %s; medians of %d runs (ns per ID; ratio = reference's ns/ID / this row's, >1 is faster)\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), counts)
	sb.WriteString("| benchmark | ns/ID | IDs/s | allocs/ID | vs embedded flake NextID | vs NEXTIDS prefetch | vs INCR | vs daemon NEXTIDS 100 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	ratio := func(ref, name string) string {
		if r, ok := med[ref]; ok && ref != name {
			return fmt.Sprintf("%.3gx", r/med[name])
		}
		return ""
	}
	for _, name := range blockOrder {
		g := name[strings.LastIndexByte(name, '/')+1:]
		var flakeR, mutexR, incrR, daemonR string
		if strings.HasPrefix(name, "daemon-") {
			daemonR = ratio("daemon-NEXTIDS-100", name)
		} else {
			flakeR = ratio("embedded-flake-NextID/"+g, name)
			mutexR = ratio("client-NextID-prefetch-NEXTIDS-10000/"+g, name)
			incrR = ratio("go-redis-INCR/"+g, name)
		}
		allocs := "-"
		if a, ok := blockAllocs[name]; ok {
			allocs = fmt.Sprintf("%.3g", a)
		}
		fmt.Fprintf(&sb, "| %s | %.3g | %.4g | %s | %s | %s | %s | %s |\n", name, med[name], 1e9/med[name], allocs, flakeR, mutexR, incrR, daemonR)
	}
	fmt.Println(sb.String())
}
