package server

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The benchmarks drive the server with go-redis over loopback, one
// connection per goroutine:
//
//	go test -run '^$' -bench . ./server/
func BenchmarkNEXTID_Pipeline1(b *testing.B)   { benchPipeline(b, 1, "NEXTID") }
func BenchmarkNEXTID_Pipeline16(b *testing.B)  { benchPipeline(b, 16, "NEXTID") }
func BenchmarkNEXTID_Pipeline128(b *testing.B) { benchPipeline(b, 128, "NEXTID") }

// BenchmarkNEXTIDS_100 counts IDs, 100 per request.
func BenchmarkNEXTIDS_100(b *testing.B) { benchPipeline(b, 1, "NEXTIDS", 100) }

func benchPipeline(b *testing.B, depth int, args ...any) {
	ts := startServer(b, Options{})
	rdb := ts.client(b, &redis.Options{PoolSize: 64})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		p := rdb.Pipeline()
		for {
			n := 0
			for ; n < depth && pb.Next(); n++ {
				p.Do(ctx, args...)
			}
			if n == 0 {
				return
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	ids := ts.stats.idsFlake.Load()
	b.ReportMetric(float64(ids)/b.Elapsed().Seconds(), "IDs/s")
	if want := uint64(b.N); len(args) == 1 && ids != want {
		b.Errorf("%d IDs issued, want %d", ids, want)
	}
}
