package sim_test

import (
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/flaked/flaked/sim"
)

// A run is a function of its seed: the same seed gives the same IDs,
// faults and outcome.
func TestRun_Deterministic(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		s := sim.NewSchedule(seed)
		a, b := sim.Run(s, sim.Options{}), sim.Run(s, sim.Options{})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two runs differ:\n%+v\n%+v", seed, a, b)
		}
		if a.IDs == 0 {
			t.Fatalf("seed %d: no IDs issued", seed)
		}
	}
}

// The fixed seed set: every ID of every schedule unique and increasing
// per process. SIM_SEEDS overrides how many. Few under go test (-race
// sees the hunt's workers and the code they run): scripts/sim hunts the
// same seeds and 9,980 more without the race detector.
func TestHunt_FixedSeeds(t *testing.T) {
	n := uint64(20)
	if v, err := strconv.ParseUint(os.Getenv("SIM_SEEDS"), 10, 64); err == nil {
		n = v
	}
	s := sim.Hunt(sim.HuntOptions{From: 1, Count: n})
	for _, f := range s.Failures {
		t.Errorf("%v\nreplay: go run ./cmd/flaked-sim replay %d", f, f.Schedule.Seed)
	}
	t.Logf("%d schedules, %.1f simulated hours, %d IDs, faults %v, %v", s.Schedules, s.Virtual.Hours(), s.IDs, s.Faults, s.Elapsed)
}
