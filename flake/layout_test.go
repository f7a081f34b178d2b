package flake_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

func TestNewLayout_Invalid_NamesRange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		seq, mach int
		unit      time.Duration
		want      error
		wantText  string
	}{
		{"negative sequence", -1, 0, 0, flake.ErrInvalidBitsSequence, "1..30"},
		{"sequence too wide", 31, 1, 0, flake.ErrInvalidBitsSequence, "1..30"},
		{"negative machine", 0, -3, 0, flake.ErrInvalidBitsMachineID, "1..30"},
		{"machine too wide", 1, 31, 0, flake.ErrInvalidBitsMachineID, "1..30"},
		{"time too short", 16, 16, 0, flake.ErrInvalidBitsTime, ">= 32"},
		{"tick below 1ms", 0, 0, time.Microsecond, flake.ErrInvalidTimeUnit, ">= 1ms"},
		{"negative tick", 0, 0, -time.Second, flake.ErrInvalidTimeUnit, ">= 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := flake.NewLayout(tc.seq, tc.mach, tc.unit, time.Time{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("err %q does not name the range %q", err, tc.wantText)
			}
		})
	}
}

func TestNewLayout_ZeroValues_AreSonyflakeDefaults(t *testing.T) {
	l := flake.DefaultLayout()
	if l.BitsTime != 39 || l.BitsSequence != 8 || l.BitsMachineID != 16 ||
		l.TimeUnit != 10*time.Millisecond || !l.StartTime.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("default layout = %+v", l)
	}
	if l.CounterMachineID() != 65535 || l.MaxMachineID() != 65534 {
		t.Fatalf("counter/max machine = %d/%d", l.CounterMachineID(), l.MaxMachineID())
	}
}

func TestLayout_ComposeDecompose_RoundTrip(t *testing.T) {
	layouts := []flake.Layout{flake.DefaultLayout()}
	l2, err := flake.NewLayout(12, 10, time.Millisecond, time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	layouts = append(layouts, l2)
	for _, l := range layouts {
		for _, p := range []struct {
			tick     int64
			seq, mid int
		}{{0, 0, 0}, {1, 2, 3}, {l.MaxTick(), l.MaxSequence(), l.CounterMachineID()}, {123456789, 7, 42}} {
			id, err := l.Compose(p.tick, p.seq, p.mid)
			if err != nil {
				t.Fatal(err)
			}
			if id > flake.MaxID {
				t.Fatalf("id %d uses bit 63", id)
			}
			got := l.Decompose(id)
			if got.Tick != p.tick || got.Sequence != p.seq || got.MachineID != p.mid || got.ID != id {
				t.Fatalf("%s: Decompose(Compose(%v)) = %+v", l, p, got)
			}
			if !got.Time.Equal(l.TickTime(p.tick)) || l.Tick(got.Time) != p.tick {
				t.Fatalf("time %v does not map back to tick %d", got.Time, p.tick)
			}
		}
		if _, err := l.Compose(l.MaxTick()+1, 0, 0); !errors.Is(err, flake.ErrInvalidTick) {
			t.Fatalf("tick overflow: %v", err)
		}
		if _, err := l.Compose(0, l.MaxSequence()+1, 0); !errors.Is(err, flake.ErrInvalidSequence) {
			t.Fatalf("sequence overflow: %v", err)
		}
		if _, err := l.Compose(0, 0, l.CounterMachineID()+1); !errors.Is(err, flake.ErrInvalidMachineID) {
			t.Fatalf("machine overflow: %v", err)
		}
	}
}

func TestLayout_Tick_BeforeEpochRoundsDown(t *testing.T) {
	l := flake.DefaultLayout()
	if got := l.Tick(l.StartTime.Add(-time.Millisecond)); got != -1 {
		t.Fatalf("tick 1ms before epoch = %d, want -1", got)
	}
	if got := l.Tick(l.StartTime.Add(25 * time.Millisecond)); got != 2 {
		t.Fatalf("tick 25ms after epoch = %d, want 2", got)
	}
}

func TestParseLayout_RoundTripAndRejects(t *testing.T) {
	l, err := flake.NewLayout(10, 12, 5*time.Millisecond, time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	got, err := flake.ParseLayout(l.String())
	if err != nil || !got.Equal(l) {
		t.Fatalf("ParseLayout(%q) = %v, %v", l.String(), got, err)
	}
	for _, bad := range []string{
		"",
		"time=39,seq=8,machine=16,tick=10ms",
		"time=39,seq=8,machine=16,tick=10ms,epoch=yesterday",
		"time=40,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z", // time bits disagree
		"time=15,seq=32,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z",
		"time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z,x=1",
		"time=39,seq=8,seq=8,tick=10ms,epoch=2025-01-01T00:00:00Z",
	} {
		if _, err := flake.ParseLayout(bad); !errors.Is(err, flake.ErrInvalidLayout) {
			t.Errorf("ParseLayout(%q) err = %v, want ErrInvalidLayout", bad, err)
		}
	}
}

func TestFormatBase32_SortsLikeIDs(t *testing.T) {
	ids := []uint64{0, 1, 31, 32, 1 << 40, 1<<40 + 1, flake.MaxID - 1, flake.MaxID}
	prev := ""
	for _, id := range ids {
		s := flake.FormatBase32(id)
		if len(s) != flake.Base32Len || s <= prev {
			t.Fatalf("FormatBase32(%d) = %q, not after %q", id, s, prev)
		}
		prev = s
		back, err := flake.ParseBase32(strings.ToLower(s))
		if err != nil || back != id {
			t.Fatalf("ParseBase32(%q) = %d, %v, want %d", s, back, err, id)
		}
		dec, err := flake.ParseID(flake.FormatID(id))
		if err != nil || dec != id {
			t.Fatalf("ParseID(FormatID(%d)) = %d, %v", id, dec, err)
		}
	}
	for _, bad := range []string{"", "-1", "abc", "9223372036854775808", "1e9", " 1"} {
		if _, err := flake.ParseID(bad); !errors.Is(err, flake.ErrInvalidID) {
			t.Errorf("ParseID(%q) err = %v", bad, err)
		}
	}
	for _, bad := range []string{"8000000000000", "ZZZZZZZZZZZZZ", "000000000000U", "0000"} {
		if _, err := flake.ParseBase32(bad); !errors.Is(err, flake.ErrInvalidID) {
			t.Errorf("ParseBase32(%q) err = %v", bad, err)
		}
	}
}
