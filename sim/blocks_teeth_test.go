//go:build simbugs

package sim_test

import (
	"testing"

	"github.com/flaked/flaked/sim"
)

// TestTeeth_Blocks: with clients taking blocks, the bugs of the generator
// a block could hide behind are still found: a block reaching past the
// reservation, a release below the blocks handed out. Run: go test -tags
// simbugs -run Teeth_Blocks ./sim/
func TestTeeth_Blocks(t *testing.T) {
	for _, name := range []string{"issue-past-reservation", "release-below-used"} {
		t.Run(name, func(t *testing.T) {
			m, err := sim.FindMutation(name)
			if err != nil {
				t.Fatal(err)
			}
			off, err := m.Enable()
			if err != nil {
				t.Fatal(err)
			}
			defer off()
			for seed := uint64(1); seed <= teethSeeds; seed++ {
				res := sim.Run(sim.NewSchedule(seed), sim.Options{Mutation: name, Blocks: true})
				if f := res.Failure; f != nil {
					t.Logf("%s found by seed %d with blocks: %v", name, seed, f)
					return
				}
			}
			t.Fatalf("%s: not found with blocks in %d schedules", name, teethSeeds)
		})
	}
}
