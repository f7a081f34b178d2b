package flake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/flake"
)

// jsSafe is the JS-safe layout docs/layout.md recommends.
func jsSafe(t *testing.T, start time.Time) flake.Layout {
	t.Helper()
	l, err := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8, StartTime: start}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSettingsLayout_BitsID_NamesRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    flake.Settings
		want error
		text string
	}{
		{"52 bits", flake.Settings{BitsID: 52}, flake.ErrInvalidBitsID, "53..63"},
		{"64 bits", flake.Settings{BitsID: 64}, flake.ErrInvalidBitsID, "53..63"},
		{"negative", flake.Settings{BitsID: -1}, flake.ErrInvalidBitsID, "53..63"},
		{"53 leaves too little time", flake.Settings{BitsID: 53, BitsSequence: 11, BitsMachineID: 11}, flake.ErrInvalidBitsTime, "53 ID - 11 sequence - 11 machine = 31, must be >= 32"},
		{"region bits = machine bits", flake.Settings{BitsMachineID: 4, BitsRegion: 4}, flake.ErrInvalidBitsRegion, "0..3"},
		{"negative region bits", flake.Settings{BitsRegion: -1}, flake.ErrInvalidBitsRegion, "0..15"},
		{"region too large", flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 2}, flake.ErrInvalidRegion, "0..1"},
		{"region without region bits", flake.Settings{Region: 1}, flake.ErrInvalidRegion, "0..0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.Layout()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v naming %q", err, tc.want, tc.text)
			}
		})
	}
	if l, err := (flake.Settings{}).Layout(); err != nil || l.BitsID() != 63 || l.BitsTime != 39 {
		t.Fatalf("zero BitsID: %+v, %v; want 63 bits, 39 of time", l, err)
	}
}

// At the extremes of every field (the last tick, the last sequence, the
// largest machine ID and the counter's), IDs of a 53-bit layout stay
// below 2^53, whatever the split between sequence and machine bits.
func TestLayout53_ExtremesBelow2to53(t *testing.T) {
	for _, sm := range [][2]int{{8, 8}, {1, 20}, {20, 1}, {10, 11}, {1, 1}} {
		l, err := flake.Settings{BitsID: 53, BitsSequence: sm[0], BitsMachineID: sm[1]}.Layout()
		if err != nil {
			t.Fatal(err)
		}
		if l.BitsTime != 53-sm[0]-sm[1] || l.MaxID() != 1<<53-1 {
			t.Fatalf("%v: time bits %d, max ID %d", l, l.BitsTime, l.MaxID())
		}
		for _, mid := range []int{0, l.MaxMachineID(), l.CounterMachineID()} {
			id, err := l.Compose(l.MaxTick(), l.MaxSequence(), mid)
			if err != nil {
				t.Fatal(err)
			}
			if id >= 1<<53 {
				t.Fatalf("%v: Compose(max tick, max seq, %d) = %d >= 2^53", l, mid, id)
			}
			if p := l.Decompose(id); p.Tick != l.MaxTick() || p.Sequence != l.MaxSequence() || p.MachineID != mid {
				t.Fatalf("%v: Decompose(%d) = %+v", l, id, p)
			}
		}
		if id, _ := l.Compose(l.MaxTick(), l.MaxSequence(), l.CounterMachineID()); id != 1<<53-1 {
			t.Fatalf("%v: the last ID is %d, want 2^53-1", l, id)
		}
		if _, ok := l.SafeIntegerEnd(); ok {
			t.Fatalf("%v: SafeIntegerEnd says IDs pass 2^53", l)
		}
		if err := l.CheckID(1 << 53); !errors.Is(err, flake.ErrInvalidID) || !strings.Contains(err.Error(), "0..9007199254740991") {
			t.Fatalf("CheckID(2^53) = %v, want ErrInvalidID naming 0..2^53-1", err)
		}
	}
}

// The canonical string's time= is meaningful now: it carries the width.
// A string a 63-bit fleet stored before widths existed reads as 63 bits.
func TestParseLayout_Width(t *testing.T) {
	old := "time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z"
	l, err := flake.ParseLayout(old)
	if err != nil || !l.Equal(flake.DefaultLayout()) || l.BitsID() != 63 || l.String() != old {
		t.Fatalf("ParseLayout(%q) = %v (%d bits), %v", old, l, l.BitsID(), err)
	}
	js := jsSafe(t, time.Time{})
	if js.String() != "time=37,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z" {
		t.Fatalf("53-bit layout string %q", js)
	}
	back, err := flake.ParseLayout(js.String())
	if err != nil || !back.Equal(js) || back.BitsID() != 53 {
		t.Fatalf("ParseLayout(%q) = %v, %v", js, back, err)
	}
	wide, _ := flake.NewLayout(8, 8, 0, time.Time{})
	if wide.Equal(js) || js.Equal(wide) {
		t.Fatalf("%v and %v differ only in width but are Equal", wide, js)
	}
	for _, bad := range []string{
		"time=36,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z", // 52 bits
		"time=48,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z", // 64 bits
		"time=0,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z",
		"time=37,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z,region_bits=0,region=0",
		"time=37,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z,region_bits=1,region=2",
		"time=37,seq=8,machine=8,tick=10ms,epoch=2025-01-01T00:00:00Z,region=1,region_bits=1", // not canonical
	} {
		if _, err := flake.ParseLayout(bad); !errors.Is(err, flake.ErrInvalidLayout) {
			t.Errorf("ParseLayout(%q) err = %v, want ErrInvalidLayout", bad, err)
		}
	}
}

// Generators of the 53-bit layout on every leasable machine ID, started
// ten ticks before the time bits run out: they issue every ID that is
// left (all of them unique and below 2^53), then refuse with
// ErrOverTimeLimit, again and again, instead of wrapping to small IDs.
func TestLayout53_GeneratorsUniqueBelow2to53_RefuseAtEnd(t *testing.T) {
	base := jsSafe(t, time.Time{})
	const ticksLeft = 10
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	epoch := now.Add(-time.Duration(base.MaxTick()-ticksLeft+1) * base.TimeUnit)
	l := jsSafe(t, epoch)
	if got := l.Tick(now); got != l.MaxTick()-ticksLeft+1 {
		t.Fatalf("start tick %d, want %d", got, l.MaxTick()-ticksLeft+1)
	}
	clk := clocktest.New(now)
	done, cancel := context.WithCancel(context.Background())
	cancel() // never wait
	seen := make(map[uint64]int, ticksLeft*256*255)
	perGen := 15 // machine IDs per generator: 17 generators cover 0..254
	for first := 0; first <= l.MaxMachineID(); first += perGen {
		s := l.Settings()
		for mid := first; mid < first+perGen; mid++ {
			s.MachineIDs = append(s.MachineIDs, mid)
		}
		s.Clock, s.MaxLead = clk, time.Hour // run ahead to the last tick at once
		g, err := flake.New(s)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]uint64, 1000)
		for {
			n, err := g.NextIDs(done, buf)
			for _, id := range buf[:n] {
				if id >= 1<<53 {
					t.Fatalf("ID %d (%+v) >= 2^53", id, l.Decompose(id))
				}
				if prev, dup := seen[id]; dup {
					t.Fatalf("ID %d issued by the generators from machine IDs %d and %d", id, prev, first)
				}
				seen[id] = first
			}
			if err != nil {
				if !errors.Is(err, flake.ErrOverTimeLimit) {
					t.Fatalf("machine IDs %d..: %v, want ErrOverTimeLimit", first, err)
				}
				break
			}
		}
		for range 3 {
			if id, err := g.NextID(); !errors.Is(err, flake.ErrOverTimeLimit) {
				t.Fatalf("after the last tick: NextID = %d, %v; want ErrOverTimeLimit", id, err)
			}
		}
		g.Close()
	}
	if want := ticksLeft * 256 * 255; len(seen) != want {
		t.Fatalf("%d IDs issued, want every one left: %d ticks x 256 x 255 machine IDs = %d", len(seen), ticksLeft, want)
	}
}
