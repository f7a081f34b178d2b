package flake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/flake"
)

// issuedPerSecond runs a generator on machineIDs at its full rate for one
// second of an injected clock (never ahead of it) and counts the IDs.
func issuedPerSecond(t *testing.T, l flake.Layout, machineIDs []int) int {
	t.Helper()
	clk := clocktest.New(t0)
	s := l.Settings()
	s.MachineIDs, s.Clock, s.MaxLead = machineIDs, clk, time.Nanosecond // never borrows a tick
	g, err := flake.New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	buf := make([]uint64, 4096)
	drain := func() int {
		n := 0
		for {
			got, err := g.NextIDs(done, buf)
			n += got
			if err != nil {
				if !errors.Is(err, flake.ErrMaxLead) {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	drain() // the tick New starts in may be partly gone
	total := 0
	for end := clk.Now().Add(time.Second); clk.Now().Before(end); {
		clk.Advance(l.TimeUnit)
		total += drain()
	}
	return total
}

// The rate `flaked plan` prints is what a generator issues: one second at
// full speed, for one machine ID and for the machine IDs MachineIDsFor
// says a rate needs (one fewer falls short of it).
func TestCapacity_IDsPerSecond_MatchesGenerator(t *testing.T) {
	for _, s := range []flake.Settings{{}, {BitsID: 53, BitsSequence: 8, BitsMachineID: 8}, {BitsSequence: 4, TimeUnit: 5 * time.Millisecond}} {
		l, err := s.Layout()
		if err != nil {
			t.Fatal(err)
		}
		if got := issuedPerSecond(t, l, []int{1}); float64(got) != l.IDsPerSecond() {
			t.Errorf("%v: %d IDs in one second, IDsPerSecond says %v", l, got, l.IDsPerSecond())
		}
		rate := 2.5 * l.IDsPerSecond()
		k := l.MachineIDsFor(rate)
		if k != 3 {
			t.Fatalf("%v: MachineIDsFor(%v) = %d, want 3", l, rate, k)
		}
		if got := issuedPerSecond(t, l, []int{1, 2, 3}); float64(got) < rate {
			t.Errorf("%v: %d machine IDs issue %d/s, below the %v asked", l, k, got, rate)
		}
		if got := issuedPerSecond(t, l, []int{1, 2}); float64(got) >= rate {
			t.Errorf("%v: %d machine IDs already issue %d/s >= %v", l, k-1, got, rate)
		}
	}
}

// End is TickTime(MaxTick+1): a generator one tick before it issues that
// tick's IDs and then refuses; one started at End cannot issue at all.
func TestCapacity_End_IsWhereTheGeneratorStops(t *testing.T) {
	l, _ := flake.Settings{BitsSequence: 15, BitsMachineID: 16, TimeUnit: time.Millisecond}.Layout() // 32 time bits: 49.7 days
	if !l.End().Equal(l.TickTime(l.MaxTick() + 1)) {
		t.Fatalf("End %v, TickTime(MaxTick+1) %v", l.End(), l.TickTime(l.MaxTick()+1))
	}
	for _, tc := range []struct {
		before time.Duration
		ids    int
	}{{time.Millisecond, 1 << 15}, {0, 0}} {
		epoch := t0.Add(-l.End().Sub(l.StartTime) + tc.before)
		s := l.Settings()
		s.StartTime, s.Clock, s.MaxLead = epoch, clocktest.New(t0), time.Hour
		g, err := flake.New(s)
		if err != nil {
			t.Fatal(err)
		}
		gl := g.Layout()
		if !gl.End().Equal(t0.Add(tc.before)) {
			t.Fatalf("End %v, want %v", gl.End(), t0.Add(tc.before))
		}
		n := 0
		for {
			id, err := g.NextID()
			if errors.Is(err, flake.ErrOverTimeLimit) {
				break
			}
			if err != nil || gl.Decompose(id).Tick != gl.MaxTick() {
				t.Fatalf("ID %d (%+v), %v: want only the last tick's", id, gl.Decompose(id), err)
			}
			n++
		}
		g.Close()
		if n != tc.ids {
			t.Errorf("%v before End: %d IDs, want %d", tc.before, n, tc.ids)
		}
	}
	// Ticks long enough that tick * TimeUnit overflows a time.Duration.
	long, _ := flake.NewLayout(8, 16, time.Hour, time.Time{})
	years := float64(int64(1)<<39) / (24 * 365.2425) // 62.7 million
	if y := long.End().Year(); y != 2025+int(years) {
		t.Errorf("End of 2^39 one-hour ticks is in year %d, want %d", y, 2025+int(years))
	}
}

// IDs pass 2^53 at SafeIntegerEnd: the last ID of the tick before is
// below it, the first of that tick is 2^53.
func TestCapacity_SafeIntegerEnd(t *testing.T) {
	l := flake.DefaultLayout()
	tick, ok := l.SafeIntegerTick()
	at, ok2 := l.SafeIntegerEnd()
	if !ok || !ok2 || !at.Equal(l.TickTime(tick)) || at.Format(time.DateOnly) != "2025-03-04" {
		t.Fatalf("SafeIntegerEnd = %v (tick %d), %v", at, tick, ok)
	}
	before, _ := l.Compose(tick-1, l.MaxSequence(), l.CounterMachineID())
	first, _ := l.Compose(tick, 0, 0)
	if before >= 1<<53 || first != 1<<53 {
		t.Fatalf("last ID before: %d, first at: %d; want < 2^53 and 2^53", before, first)
	}
}
