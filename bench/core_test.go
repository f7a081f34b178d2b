// Package bench compares flaked's generator with its peers. It is its own
// module (bench/go.mod) so the peers' libraries never enter flaked's.
//
// Run it with scripts/bench core, which prints a table of medians with
// ratios to sonyflake v2, or directly:
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 5 .
//
// Every generator in BenchmarkCore uses a layout whose sequence cannot run
// out during a benchmark, so the figures compare CPU cost, not sleeping:
//
//   - flaked and sonyflake v2: 20 sequence bits, 8 machine bits, 10 ms ticks
//     (2^20 IDs per tick = 104.9M IDs/s per machine ID; 63-20-8 = 35 time
//     bits, which from the default epoch 2025-01-01 last until 2035). Fewer
//     time bits would overflow the default epoch within months, and every
//     NextID would then fail with ErrOverTimeLimit; each generator's first
//     ID is checked, and any error from NextID fails the benchmark.
//     flaked runs with MaxLead 1h: it issues faster than 104.9M IDs/s in
//     places (NextIDs), borrowing ticks ahead of the clock, and must never
//     wait (checked after each benchmark through Stats().Waits).
//   - bwmarrin/snowflake: 6 node bits, 16 step bits, 1 ms ticks (65.5M IDs/s).
//     Its 8/14 split would give 16.4M IDs/s, which its ~60 ns per ID comes
//     close to, and it spins when a millisecond's steps run out.
//   - sonyflake v1 cannot change its layout (39/8/16, 10 ms: 25,600 IDs/s), so
//     it sleeps when its sequence runs out. It is shown for reference with
//     the label "fixed default layout (sleeps when the sequence runs out)"
//     and is never used for a ratio.
//
// BenchmarkDefaultLayout is the other question: at the default layout
// (39/8/16, 10 ms) one machine ID sustains 25,600 IDs/s, and the figure
// that matters is IDs/s, not ns.
package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	sonyv1 "github.com/sony/sonyflake"
	sonyv2 "github.com/sony/sonyflake/v2"

	"github.com/flaked/flaked/flake"
)

// The wide layout of flaked and sonyflake v2.
const (
	wideBitsSequence  = 20
	wideBitsMachineID = 8
	wideTimeUnit      = 10 * time.Millisecond
)

// bwmarrin/snowflake's layout (see bwmarrinNode).
const (
	bwNodeBits = 6
	bwStepBits = 16
)

const batch = 100 // NextIDs batch size

var (
	oneMachine   = []int{1}
	fourMachines = []int{1, 2, 3, 4}
)

// wideSettings is the wide layout with MaxLead 1h, so the generator never
// waits during a benchmark.
func wideSettings(machines []int) flake.Settings {
	return flake.Settings{
		BitsSequence:  wideBitsSequence,
		BitsMachineID: wideBitsMachineID,
		TimeUnit:      wideTimeUnit,
		MachineIDs:    machines,
		MaxLead:       time.Hour,
	}
}

// newFlaked starts a generator, closes it at the end of the benchmark and
// checks that its first ID is valid: one of its machine IDs, a tick between
// the clock's and the clock's plus MaxLead.
func newFlaked(tb testing.TB, s flake.Settings) *flake.Generator {
	tb.Helper()
	g, err := flake.New(s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	before := g.Layout().Tick(time.Now())
	id, err := g.NextID()
	if err != nil {
		tb.Fatalf("flaked: first NextID: %v", err)
	}
	p := g.Layout().Decompose(id)
	lead := s.MaxLead
	if lead == 0 {
		lead = flake.DefaultMaxLead
	}
	maxTick := g.Layout().Tick(time.Now().Add(lead)) + 1
	if p.Tick < before-1 || p.Tick > maxTick || !contains(g.MachineIDs(), p.MachineID) {
		tb.Fatalf("flaked: first ID %d decomposes to %+v: want a tick in %d..%d and machine ID in %v",
			id, p, before-1, maxTick, g.MachineIDs())
	}
	return g
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// noWaits fails the benchmark if the generator ever waited for the clock:
// then it measured sleeping, not CPU cost.
func noWaits(b *testing.B, g *flake.Generator) {
	b.Helper()
	if st := g.Stats(); st.Waits != 0 {
		b.Fatalf("flaked waited %d times for the clock (lead %v): the layout ran out", st.Waits, st.Lead)
	}
}

// newSonyflakeV2 starts sonyflake v2 on machine ID 1 and checks its first
// ID: machine 1, a tick at the clock's.
func newSonyflakeV2(tb testing.TB, bitsSequence, bitsMachineID int, unit time.Duration) *sonyv2.Sonyflake {
	tb.Helper()
	sf, err := sonyv2.New(sonyv2.Settings{
		BitsSequence:  bitsSequence,
		BitsMachineID: bitsMachineID,
		TimeUnit:      unit,
		MachineID:     func() (int, error) { return 1, nil },
	})
	if err != nil {
		tb.Fatal(err)
	}
	if unit == 0 {
		unit = 10 * time.Millisecond
	}
	before := time.Now().Add(-unit)
	id, err := sf.NextID()
	if err != nil {
		tb.Fatalf("sonyflake v2: first NextID: %v", err)
	}
	at, p := sf.ToTime(id), sf.Decompose(id)
	if id <= 0 || p["machine"] != 1 || at.Before(before) || at.After(time.Now()) {
		tb.Fatalf("sonyflake v2: first ID %d decomposes to %v at %v: want machine 1 at the current time", id, p, at)
	}
	return sf
}

// newSonyflakeV1 starts sonyflake v1 (fixed layout 39/8/16, 10 ms, epoch
// 2014-09-01) on machine ID 1 and checks its first ID.
func newSonyflakeV1(tb testing.TB) *sonyv1.Sonyflake {
	tb.Helper()
	sf, err := sonyv1.New(sonyv1.Settings{MachineID: func() (uint16, error) { return 1, nil }})
	if err != nil {
		tb.Fatal(err)
	}
	id, err := sf.NextID()
	if err != nil {
		tb.Fatalf("sonyflake v1: first NextID: %v", err)
	}
	epoch := time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC)
	at := epoch.Add(sonyv1.ElapsedTime(id))
	if sonyv1.MachineID(id) != 1 || id>>63 != 0 || time.Since(at) < 0 || time.Since(at) > time.Second {
		tb.Fatalf("sonyflake v1: first ID %d decomposes to %v at %v: want machine 1 at the current time",
			id, sonyv1.Decompose(id), at)
	}
	return sf
}

// bwmarrinNode returns a bwmarrin/snowflake node with 6 node bits and 16
// step bits (65,536 IDs per millisecond). Its layout settings, NodeBits and
// StepBits, are package-level variables: global to the process, read by
// NewNode and by ID's Node/Step/Time methods, so they are set here before
// every NewNode and nothing else in this binary uses the package. Generate
// returns no error: when a millisecond's steps run out it spins, and it does
// not detect running out of time bits (41 here: until 2079 from its 2010
// epoch), so the first ID is checked instead.
func bwmarrinNode(tb testing.TB) *snowflake.Node {
	tb.Helper()
	snowflake.NodeBits, snowflake.StepBits = bwNodeBits, bwStepBits
	n, err := snowflake.NewNode(1)
	if err != nil {
		tb.Fatal(err)
	}
	id := n.Generate()
	at := time.UnixMilli(id.Time())
	if id <= 0 || id.Node() != 1 || time.Since(at) < -time.Millisecond || time.Since(at) > time.Second {
		tb.Fatalf("bwmarrin: first ID %d: node %d at %v: want node 1 at the current time", id, id.Node(), at)
	}
	return n
}

// BenchmarkCore is NextID of every generator at a layout that cannot run
// out, single goroutine (b.Loop, the b.N loop) and RunParallel (GOMAXPROCS
// goroutines on one generator).
func BenchmarkCore(b *testing.B) {
	for _, mode := range []string{"single", "parallel"} {
		parallel := mode == "parallel"
		b.Run(mode, func(b *testing.B) {
			b.Run("flaked", func(b *testing.B) { benchFlaked(b, parallel, oneMachine) })
			b.Run("flaked-4machines", func(b *testing.B) { benchFlaked(b, parallel, fourMachines) })
			b.Run("flaked-NextIDs100", func(b *testing.B) { benchFlakedBatch(b, parallel) })
			b.Run("sonyflake-v2", func(b *testing.B) { benchSonyflakeV2(b, parallel) })
			b.Run("bwmarrin", func(b *testing.B) { benchBwmarrin(b, parallel) })
			b.Run("sonyflake-v1-fixed-default-layout-sleeps", func(b *testing.B) { benchSonyflakeV1(b, parallel) })
		})
	}
}

// The bodies below call each generator's method directly (no function
// values or interfaces), so no peer pays for an indirection it would not
// have in real use.

func benchFlaked(b *testing.B, parallel bool, machines []int) {
	g := newFlaked(b, wideSettings(machines))
	b.ReportAllocs()
	if parallel {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.NextID(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if _, err := g.NextID(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	noWaits(b, g)
}

func benchFlakedBatch(b *testing.B, parallel bool) {
	g := newFlaked(b, wideSettings(oneMachine))
	ctx := context.Background()
	b.ReportAllocs()
	if parallel {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			dst := make([]uint64, batch)
			for pb.Next() {
				if n, err := g.NextIDs(ctx, dst); err != nil || n != batch {
					b.Errorf("NextIDs = %d, %v; want %d", n, err, batch)
					return
				}
			}
		})
	} else {
		dst := make([]uint64, batch)
		for b.Loop() {
			if n, err := g.NextIDs(ctx, dst); err != nil || n != batch {
				b.Fatalf("NextIDs = %d, %v; want %d", n, err, batch)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/ID")
	noWaits(b, g)
}

func benchSonyflakeV2(b *testing.B, parallel bool) {
	sf := newSonyflakeV2(b, wideBitsSequence, wideBitsMachineID, wideTimeUnit)
	b.ReportAllocs()
	if parallel {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := sf.NextID(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if _, err := sf.NextID(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchBwmarrin(b *testing.B, parallel bool) {
	n := bwmarrinNode(b)
	b.ReportAllocs()
	if parallel {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Generate() // no error to check: it spins instead
			}
		})
	} else {
		for b.Loop() {
			n.Generate()
		}
	}
}

func benchSonyflakeV1(b *testing.B, parallel bool) {
	sf := newSonyflakeV1(b)
	b.ReportAllocs()
	if parallel {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := sf.NextID(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if _, err := sf.NextID(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDefaultLayout is the sustained rate of one machine ID at the
// default layout (39/8/16, 10 ms: 256 IDs per tick, 25,600 IDs/s), reported
// as IDs/s. flaked first borrows up to MaxLead (default 1 s) of future
// ticks; that burst is drained before the timer starts and reported as
// burst-IDs, so IDs/s is the steady state, where it waits for the clock
// like sonyflake v2 sleeps. flaked-4machines interleaves 4 machine IDs:
// 4 x 25,600 IDs/s.
func BenchmarkDefaultLayout(b *testing.B) {
	b.Run("flaked", func(b *testing.B) { benchDefaultFlaked(b, oneMachine) })
	b.Run("flaked-4machines", func(b *testing.B) { benchDefaultFlaked(b, fourMachines) })
	b.Run("sonyflake-v2", func(b *testing.B) {
		sf := newSonyflakeV2(b, 0, 0, 0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sf.NextID(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
	})
}

func benchDefaultFlaked(b *testing.B, machines []int) {
	g := newFlaked(b, flake.Settings{MachineIDs: machines})
	// Drain the lead: issue until NextID would wait for the clock.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	burst := 1 // newFlaked's first ID
	for {
		_, err := g.NextIDContext(done)
		if errors.Is(err, flake.ErrMaxLead) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		burst++
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
	b.ReportMetric(float64(burst), "burst-IDs")
}

// TestFlakedNextIDZeroAllocs asserts that NextID, also with interleaved
// machine IDs, and NextIDs into a caller's slice allocate nothing.
func TestFlakedNextIDZeroAllocs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		machines []int
	}{{"one machine ID", oneMachine}, {"4 machine IDs", fourMachines}} {
		g := newFlaked(t, wideSettings(tc.machines))
		var err error
		if n := testing.AllocsPerRun(10000, func() { _, err = g.NextID() }); n != 0 {
			t.Errorf("%s: NextID allocates %v times per call", tc.name, n)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	g := newFlaked(t, wideSettings(oneMachine))
	dst := make([]uint64, batch)
	var err error
	if n := testing.AllocsPerRun(1000, func() { _, err = g.NextIDs(context.Background(), dst) }); n != 0 {
		t.Errorf("NextIDs allocates %v times per call", n)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestFirstIDsValid runs every constructor once, so a layout that has run
// out of time bits (every NextID failing with ErrOverTimeLimit) shows up in
// a plain go test, not only in a benchmark run.
func TestFirstIDsValid(t *testing.T) {
	newFlaked(t, wideSettings(oneMachine))
	newFlaked(t, wideSettings(fourMachines))
	newFlaked(t, flake.Settings{MachineID: 1})
	newSonyflakeV2(t, wideBitsSequence, wideBitsMachineID, wideTimeUnit)
	newSonyflakeV2(t, 0, 0, 0)
	newSonyflakeV1(t)
	bwmarrinNode(t)
}
