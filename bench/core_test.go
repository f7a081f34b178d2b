// Package bench compares flaked with its peers. It is its own module so
// peers' libraries never enter flaked's.
package bench

import (
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	sonyv1 "github.com/sony/sonyflake"
	sonyv2 "github.com/sony/sonyflake/v2"

	"github.com/flaked/flaked/flake"
)

// Every generator uses a layout whose sequence cannot run out within a
// benchmark, so the figures compare CPU cost, not sleeping — except
// sonyflake v1, whose layout is fixed (8 sequence bits: 25,600 IDs/s); it
// sleeps, and is shown for reference, not used for ratios.

func ours(b *testing.B) func() (uint64, error) {
	g, err := flake.New(flake.Settings{BitsSequence: 20, BitsMachineID: 8, MachineID: 1, MaxLead: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g.NextID
}

func sonyflakeV2(b *testing.B) func() (uint64, error) {
	sf, err := sonyv2.New(sonyv2.Settings{BitsSequence: 20, BitsMachineID: 8, MachineID: func() (int, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	return func() (uint64, error) { id, err := sf.NextID(); return uint64(id), err }
}

func sonyflakeV1(b *testing.B) func() (uint64, error) {
	sf, err := sonyv1.New(sonyv1.Settings{MachineID: func() (uint16, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	return sf.NextID
}

func bwmarrin(b *testing.B) func() (uint64, error) {
	// bwmarrin/snowflake's layout is package-level state: 14 step bits
	// give 16,384 IDs per millisecond.
	snowflake.NodeBits, snowflake.StepBits = 8, 14
	n, err := snowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	return func() (uint64, error) { return uint64(n.Generate().Int64()), nil }
}

var peers = []struct {
	name string
	make func(*testing.B) func() (uint64, error)
}{
	{"flaked", ours},
	{"sonyflake-v2", sonyflakeV2},
	{"bwmarrin", bwmarrin},
	{"sonyflake-v1-fixed-layout-sleeps", sonyflakeV1},
}

func BenchmarkNextID(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			next := p.make(b)
			if _, err := next(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNextIDParallel(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			next := p.make(b)
			if _, err := next(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := next(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func TestOurNextID_ZeroAllocs(t *testing.T) {
	g, err := flake.New(flake.Settings{BitsSequence: 20, BitsMachineID: 8, MaxLead: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := testing.AllocsPerRun(10000, func() { _, _ = g.NextID() }); n != 0 {
		t.Fatalf("NextID allocates %v times", n)
	}
}
