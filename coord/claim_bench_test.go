package coord_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redistest"
)

// BenchmarkClaim measures a claim (TIME + claim.lua) against a real
// redis-server with 10 and with 60,000 machine IDs registered, all of them
// held by live leases, so a claim must find one of the few free IDs. It
// reports p50/p99 latency and the server's time per claim script from
// INFO commandstats. Each claim is released outside the timed part.
//
//	go test -run '^$' -bench Claim -benchtime 2000x ./coord/
func BenchmarkClaim(b *testing.B) {
	redistest.Require(b)
	for _, registered := range []int{10, 60_000} {
		b.Run(fmt.Sprintf("registered=%d", registered), func(b *testing.B) {
			srv := redistest.Start(b, redistest.Options{})
			rdb := srv.Client(b)
			ctx := context.Background()
			fill(b, rdb, registered)
			o := coord.Options{Horizon: time.Millisecond}
			if _, _, err := coord.MakeRegistry(ctx, rdb, o); err != nil {
				b.Fatal(err)
			}
			reg, err := coord.NewRegistry(rdb, o)
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			rdb.ConfigResetStat(ctx)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				l, err := reg.Claim(ctx, coord.ClaimOptions{})
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := l.Release(ctx, l.Floor()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportLatency(b, lat)
			calls, usec := scriptStats(b, rdb, "evalsha")
			// Release runs the same command; it is cheap and counted too,
			// so this is an upper bound of the claim's own server time.
			if calls > 0 {
				b.ReportMetric(usec/float64(b.N), "redis-µs/claim")
				b.ReportMetric(float64(calls)/float64(b.N), "scripts/claim")
			}
		})
	}
}

// fill registers n machine IDs held by live leases of other owners.
func fill(b *testing.B, rdb *redis.Client, n int) {
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for id := range n {
		pipe.SAdd(ctx, "{flaked}:machines", id)
		pipe.Set(ctx, "{flaked}:lease:"+strconv.Itoa(id), "someone-else", time.Hour)
		pipe.HSet(ctx, "{flaked}:reserved", strconv.Itoa(id), 1)
		if id%1000 == 999 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
}

func scriptStats(b *testing.B, rdb *redis.Client, cmd string) (calls int64, usec float64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_"+cmd+":") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_"+cmd+":")), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return calls, usec
}

// reportLatency reports the p50 and p99 of lat, in µs.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
