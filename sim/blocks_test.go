package sim_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/flaked/flaked/sim"
)

// Clients taking blocks: every other batch of the workload is a block
// (NEXTBLOCK) on the same schedules, faults and all (kills, pauses, Redis
// failovers and losses, clock steps, state-file copies, mode switches).
// Every ID of every block is unique and increasing per process.
// SIM_BLOCK_SEEDS overrides how many seeds.
func TestHunt_Blocks(t *testing.T) {
	n := uint64(100)
	if v, err := strconv.ParseUint(os.Getenv("SIM_BLOCK_SEEDS"), 10, 64); err == nil {
		n = v
	}
	s := sim.Hunt(sim.HuntOptions{From: 1, Count: n, Run: sim.Options{Blocks: true}})
	for _, f := range s.Failures {
		t.Errorf("%v\nreplay: go run ./cmd/flaked-sim replay --blocks %d", f, f.Schedule.Seed)
	}
	t.Logf("%d schedules with blocks, %.1f simulated hours, %d IDs, faults %v, %v", s.Schedules, s.Virtual.Hours(), s.IDs, s.Faults, s.Elapsed)
}
