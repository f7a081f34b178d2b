package sim_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/flaked/flaked/sim"
)

// Named sequences under the simulator's faults (Redis failovers to stale
// replicas, restarts from old snapshots, total loss, kills, pauses, clean
// restarts): every value handed out once and increasing per process.
// SIM_SEQ_SEEDS overrides how many schedules (60; 10 under -short).
func TestSequences_FixedSeeds(t *testing.T) {
	n := uint64(60)
	if testing.Short() {
		n = 10
	}
	if v, err := strconv.ParseUint(os.Getenv("SIM_SEQ_SEEDS"), 10, 64); err == nil {
		n = v
	}
	var values, restores int
	faults := map[string]int{}
	for seed := uint64(1); seed <= n; seed++ {
		res := sim.Run(sim.NewSchedule(seed), sim.Options{Sequences: true})
		if res.Failure != nil {
			t.Errorf("seed %d: %v", seed, res.Failure)
		}
		values += res.SeqValues
		restores += res.SeqRestores
		for k, v := range res.Faults {
			faults[k] += v
		}
	}
	if values == 0 {
		t.Fatal("no sequence value handed out")
	}
	t.Logf("%d schedules: %d sequence values checked, %d operator restores, faults %v", n, values, restores, faults)
}
