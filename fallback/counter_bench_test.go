package fallback_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

// The benchmarks compare, in one run, counter-mode NextID in steady state
// with a plain INCR round trip on the same go-redis client against a real
// redis-server, and with flake-mode NextID. Both generators use a wide
// layout (20 sequence bits, 8 machine bits: 100M IDs per second) and may run
// up to an hour ahead of the clock, so neither waits for ticks: one
// goroutine issues about that rate. The counter starts at the current tick,
// as after running below capacity (a fresh key would start at the lead,
// where the layout's rate caps it from the first ID).
//
//	go test -run '^$' -bench . -count 5 ./fallback/

func benchRedis(b *testing.B) redis.UniversalClient {
	redistest.Require(b)
	return redistest.Start(b, redistest.Options{}).Client(b)
}

func benchCounter(b *testing.B, maxSegment int) *fallback.Counter {
	l, err := flake.NewLayout(20, 8, 0, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	rdb := benchRedis(b)
	if err := rdb.HSet(context.Background(), "{flaked}:counter", "tick", l.Tick(time.Now()), "seq", 0).Err(); err != nil {
		b.Fatal(err)
	}
	c := newCounter(b, rdb, fallback.Options{Layout: l, MaxLead: time.Hour, MaxSegment: maxSegment})
	if _, err := c.NextID(context.Background()); err != nil { // first segment
		b.Fatal(err)
	}
	return c
}

func reportCounter(b *testing.B, c *fallback.Counter) {
	st := c.Stats()
	b.ReportMetric(float64(st.Waits), "waits")
	b.ReportMetric(float64(st.SegmentsFetched), "segments")
}

// BenchmarkNextID_Counter uses the default MaxSegment (65536): at this
// rate a segment lasts about 0.6 ms, so the prefetch sometimes loses the
// race with the buffer (see the waits metric).
func BenchmarkNextID_Counter(b *testing.B) { benchNextID(b, 0) }

// BenchmarkNextID_CounterSeg1M allows 2^20-value segments (about 10 ms).
func BenchmarkNextID_CounterSeg1M(b *testing.B) { benchNextID(b, 1<<20) }

func BenchmarkNextIDParallel_Counter(b *testing.B) { benchNextIDParallel(b, 0) }

func BenchmarkNextIDParallel_CounterSeg1M(b *testing.B) { benchNextIDParallel(b, 1<<20) }

func benchNextID(b *testing.B, maxSegment int) {
	c := benchCounter(b, maxSegment)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.NextID(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportCounter(b, c)
}

func benchNextIDParallel(b *testing.B, maxSegment int) {
	c := benchCounter(b, maxSegment)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.NextID(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCounter(b, c)
}

func BenchmarkINCR_RedisServer(b *testing.B) {
	rdb := benchRedis(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Incr(ctx, "{flaked}:bench").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkINCRParallel_RedisServer(b *testing.B) {
	rdb := benchRedis(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := rdb.Incr(ctx, "{flaked}:bench").Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchFlake(b *testing.B) *flake.Generator {
	g, err := flake.New(flake.Settings{BitsSequence: 20, BitsMachineID: 8, MachineID: 1, MaxLead: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

func BenchmarkNextID_Flake(b *testing.B) {
	g := benchFlake(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextIDParallel_Flake(b *testing.B) {
	g := benchFlake(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
