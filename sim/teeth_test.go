//go:build simbugs

package sim_test

import (
	"testing"

	"github.com/flaked/flaked/sim"
)

// teethSeeds bounds the seeds the simulator may need to find each bug.
const teethSeeds = 5000

// TestTeeth brings back each bug the design exists to prevent and shows
// the simulator finds it within teethSeeds schedules. A simulator that
// cannot find known bugs proves nothing. Run: go test -tags simbugs -run Teeth ./sim/
func TestTeeth(t *testing.T) {
	for _, m := range sim.Mutations {
		t.Run(m.Name, func(t *testing.T) {
			off, err := m.Enable()
			if err != nil {
				t.Fatal(err)
			}
			defer off()
			for seed := uint64(1); seed <= teethSeeds; seed++ {
				res := sim.Run(sim.NewSchedule(seed), sim.Options{Mutation: m.Name})
				f := res.Failure
				if f == nil {
					continue
				}
				if m.Stray && f.First.Stray == f.Second.Stray {
					// Its other edit (the first line of defence off) shows
					// on its own; this one must show as a stray's duplicate.
					t.Logf("%s: seed %d failed, but not between the fleet's layout and another: %v", m.Name, seed, f)
					continue
				}
				t.Logf("%s found by seed %d: %v", m.Name, seed, f)
				return
			}
			t.Fatalf("%s (%s): not found in %d schedules", m.Name, m.Bug, teethSeeds)
		})
	}
}
