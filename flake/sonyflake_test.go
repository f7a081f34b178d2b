package flake_test

import (
	"testing"
	"time"

	"github.com/sony/sonyflake/v2"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/flake"
)

// TestSonyflakeV2_DecomposesOurIDs checks bit compatibility with the real
// sonyflake v2: its Decompose and ToTime read our IDs as we do, for the
// default layout and a non-default one, and its Compose builds our IDs.
func TestSonyflakeV2_DecomposesOurIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    flake.Settings
	}{
		{"default", flake.Settings{MachineID: 0x1234}},
		{"12seq-10machine-1ms-2020", flake.Settings{
			BitsSequence: 12, BitsMachineID: 10, TimeUnit: time.Millisecond,
			StartTime: time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC), MachineID: 513,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			tc.s.Clock = clk
			g, err := flake.New(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			sf, err := sonyflake.New(sonyflake.Settings{
				BitsSequence:  tc.s.BitsSequence,
				BitsMachineID: tc.s.BitsMachineID,
				TimeUnit:      tc.s.TimeUnit,
				StartTime:     tc.s.StartTime,
				MachineID:     func() (int, error) { return tc.s.MachineID, nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			l := g.Layout()
			for i := 0; i < 3000; i++ {
				if i%700 == 0 {
					clk.Advance(l.TimeUnit * 3)
				}
				id, err := g.NextID()
				if err != nil {
					t.Fatal(err)
				}
				ours := l.Decompose(id)
				theirs := sf.Decompose(int64(id))
				if theirs["time"] != ours.Tick || theirs["sequence"] != int64(ours.Sequence) ||
					theirs["machine"] != int64(ours.MachineID) || theirs["id"] != int64(id) {
					t.Fatalf("id %d: sonyflake reads %v, we read %+v", id, theirs, ours)
				}
				if ours.MachineID != tc.s.MachineID {
					t.Fatalf("machine %d, want %d", ours.MachineID, tc.s.MachineID)
				}
				if !sf.ToTime(int64(id)).Equal(ours.Time) {
					t.Fatalf("sonyflake ToTime %v, ours %v", sf.ToTime(int64(id)), ours.Time)
				}
				composed, err := sf.Compose(ours.Time, ours.Sequence, ours.MachineID)
				if err != nil || uint64(composed) != id {
					t.Fatalf("sonyflake Compose = %d, %v; want %d", composed, err, id)
				}
			}
		})
	}
}
