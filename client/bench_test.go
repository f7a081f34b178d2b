package client_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/server"
)

// benchResult is one run of a sub-benchmark.
type benchResult struct {
	n           int // b.N
	idsPerSec   float64
	p50, p99    time.Duration
	reference   string // the sub-benchmark it is compared with
	isReference bool
	description string
}

// BenchmarkClient measures the client against one daemon on a real
// redis-server, and, in the same run, the same go-redis configuration
// doing INCR against that redis-server (and NEXTID with no client layer).
// Each sub-benchmark reports IDs/s and p50/p99 latency per call; the
// parent prints a table with the ratio of each to INCR at the same
// concurrency.
//
//	go test -run '^$' -bench BenchmarkClient -benchtime 2s ./client/
//
// The daemon's layout has 16 sequence bits, so the generator's rate limit
// (25,600 IDs/s per machine ID at the default 8 bits) is not what is
// measured.
func BenchmarkClient(b *testing.B) {
	f := newFleet(b)
	d := f.start(b, server.Options{})
	const pool = 64
	base := client.Options{Addrs: []string{d.addr}, PoolSize: pool}

	ropts, err := client.RedisOptions(f.redis.Addr(), base)
	if err != nil {
		b.Fatal(err)
	}
	incr := redis.NewClient(ropts)
	defer incr.Close()
	dopts, _ := client.RedisOptions(d.addr, base)
	raw := redis.NewClient(dopts)
	defer raw.Close()

	direct := newClient(b, base)
	pf := base
	pf.Prefetch = 1000
	prefetch := map[int]*client.Client{1: newClient(b, pf), 32: newClient(b, pf)}
	pf.Prefetch = 10_000
	prefetch10k := map[int]*client.Client{1: newClient(b, pf), 32: newClient(b, pf)}

	results := map[string][]*benchResult{}
	var order []string
	for _, g := range []int{1, 32} {
		ref := fmt.Sprintf("INCR/g=%d", g)
		for _, v := range []struct {
			name, desc string
			ids        int
			op         func(ctx context.Context) error
		}{
			{"INCR", "redis-server INCR, same go-redis config (reference)", 1, func(ctx context.Context) error {
				return incr.Incr(ctx, "bench:incr").Err()
			}},
			{"raw-NEXTID", "daemon NEXTID, plain go-redis (no client layer)", 1, func(ctx context.Context) error {
				return raw.Do(ctx, "NEXTID").Err()
			}},
			{"NextID", "client NextID, no prefetch", 1, func(ctx context.Context) error {
				_, err := direct.NextID(ctx)
				return err
			}},
			{"NextID-prefetch1000", "client NextID, Prefetch 1000", 1, func(ctx context.Context) error {
				_, err := prefetch[g].NextID(ctx)
				return err
			}},
			{"NextID-prefetch10000", "client NextID, Prefetch 10000", 1, func(ctx context.Context) error {
				_, err := prefetch10k[g].NextID(ctx)
				return err
			}},
			{"NextIDs100", "client NextIDs(100) (IDs/s counts 100 per call)", 100, func(ctx context.Context) error {
				_, err := direct.NextIDs(ctx, 100)
				return err
			}},
		} {
			name := fmt.Sprintf("%s/g=%d", v.name, g)
			order = append(order, name)
			b.Run(name, func(b *testing.B) {
				r := measure(b, g, v.ids, v.op)
				r.n, r.reference, r.isReference, r.description = b.N, ref, v.name == "INCR", v.desc
				results[name] = append(results[name], r)
			})
		}
	}
	fmt.Printf("\n%s\n", table(order, results))
	for _, g := range []int{1, 32} {
		for _, pc := range []struct {
			size int
			c    *client.Client
		}{{1000, prefetch[g]}, {10_000, prefetch10k[g]}} {
			st := pc.c.Stats()
			fmt.Printf("prefetch %d, g=%d, all runs: %d IDs prefetched, %d expired between runs, %d NextID calls waited for a batch\n",
				pc.size, g, st.Prefetched, st.Expired, st.Waits)
		}
	}
	fmt.Println()
}

// measure runs op b.N times from g goroutines and reports IDs/s and the
// p50 and p99 latency of one call.
func measure(b *testing.B, g, idsPerOp int, op func(ctx context.Context) error) *benchResult {
	ctx := context.Background()
	lat := make([][]time.Duration, g)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	b.ResetTimer()
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, b.N/g+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(ctx); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				l = append(l, time.Since(t0))
			}
			lat[i] = l
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := &benchResult{
		idsPerSec: float64(b.N*idsPerOp) / elapsed.Seconds(),
		p50:       all[len(all)/2],
		p99:       all[min(len(all)-1, len(all)*99/100)],
	}
	b.ReportMetric(r.idsPerSec, "IDs/s")
	b.ReportMetric(float64(r.p50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(r.p99.Nanoseconds())/1e3, "p99-µs")
	return r
}

// final keeps, of a sub-benchmark's runs, the last of each -count: the
// testing package runs it with growing b.N (1 first) until the run lasts
// -benchtime, so a run whose b.N is not above the previous one starts a
// new count.
func final(runs []*benchResult) []*benchResult {
	var out []*benchResult
	for i, r := range runs {
		if i+1 == len(runs) || runs[i+1].n <= r.n {
			out = append(out, r)
		}
	}
	return out
}

// median is the median of f over the runs (the upper one of an even
// number).
func median(runs []*benchResult, f func(*benchResult) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// table is a Markdown table of the medians over -count runs, with ratios
// to the reference at the same concurrency (ratios of the medians).
func table(order []string, results map[string][]*benchResult) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d CPUs, GOMAXPROCS %d, %s; medians of %d runs\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), len(final(results[order[0]])))
	sb.WriteString("| benchmark | what | IDs/s | p50 µs | p99 µs | IDs/s ÷ INCR's | p99 ÷ INCR's |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	ids := func(r *benchResult) float64 { return r.idsPerSec }
	p50 := func(r *benchResult) float64 { return float64(r.p50.Nanoseconds()) / 1e3 }
	p99 := func(r *benchResult) float64 { return float64(r.p99.Nanoseconds()) / 1e3 }
	for _, name := range order {
		runs := final(results[name])
		if len(runs) == 0 {
			continue
		}
		r := runs[0]
		ratio, p99ratio := "", ""
		if ref := final(results[r.reference]); len(ref) > 0 && !r.isReference {
			ratio = fmt.Sprintf("%.2f×", median(runs, ids)/median(ref, ids))
			p99ratio = fmt.Sprintf("%.2f×", median(runs, p99)/median(ref, p99))
		}
		fmt.Fprintf(&sb, "| %s | %s | %.0f | %.1f | %.1f | %s | %s |\n", name, r.description,
			median(runs, ids), median(runs, p50), median(runs, p99), ratio, p99ratio)
	}
	return sb.String()
}
