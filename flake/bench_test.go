package flake_test

import (
	"testing"
	"time"

	"github.com/sony/sonyflake/v2"

	"github.com/flaked/flaked/flake"
)

// The benchmarks compare CPU cost with sonyflake v2 in one run. Both use a
// layout whose sequence cannot run out within a benchmark (20 sequence
// bits: 100M IDs/s per machine ID; 35 time bits last until 2035), so
// neither sleeps; ours may run up to an hour ahead of the clock.
//
//	go test -run '^$' -bench . -count 5 ./flake/
func wide(b *testing.B) *flake.Generator {
	g, err := flake.New(flake.Settings{BitsSequence: 20, BitsMachineID: 8, MachineID: 1, MaxLead: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

func wideSony(b *testing.B) *sonyflake.Sonyflake {
	sf, err := sonyflake.New(sonyflake.Settings{BitsSequence: 20, BitsMachineID: 8,
		MachineID: func() (int, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sf.NextID(); err != nil {
		b.Fatal(err)
	}
	return sf
}

func BenchmarkNextID_Flaked(b *testing.B) {
	g := wide(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextID_SonyflakeV2(b *testing.B) {
	sf := wideSony(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sf.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextIDParallel_Flaked(b *testing.B) {
	g := wide(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkNextIDParallel_SonyflakeV2(b *testing.B) {
	sf := wideSony(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sf.NextID(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNextID_DefaultLayout is the sustained rate of one machine ID at
// the default layout: 25,600 IDs/s, after borrowing up to MaxLead.
func BenchmarkNextID_DefaultLayout(b *testing.B) {
	g, err := flake.New(flake.Settings{MachineID: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "IDs/s")
}
