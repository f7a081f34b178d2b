package coord_test

import (
	"context"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// BenchmarkRenew measures a renewal (renew.lua) of a lease on one machine
// ID against a real redis-server: p50/p99 latency and the server's time
// per script from INFO commandstats.
//
//	go test -run '^$' -bench Renew -benchtime 2000x ./coord/
func BenchmarkRenew(b *testing.B) {
	redistest.Require(b)
	srv := redistest.Start(b, redistest.Options{})
	rdb := srv.Client(b)
	ctx := context.Background()
	o := coord.Options{Horizon: time.Millisecond}
	if _, _, err := coord.MakeRegistry(ctx, rdb, o); err != nil {
		b.Fatal(err)
	}
	reg, err := coord.NewRegistry(rdb, o)
	if err != nil {
		b.Fatal(err)
	}
	l, err := reg.Claim(ctx, coord.ClaimOptions{})
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	rdb.ConfigResetStat(ctx)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := l.Renew(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, lat)
	if calls, usec := scriptStats(b, rdb, "evalsha"); calls > 0 {
		b.ReportMetric(usec/float64(calls), "redis-µs/script")
	}
}
