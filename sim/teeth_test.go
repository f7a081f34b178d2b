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
			s := sim.Hunt(sim.HuntOptions{From: 1, Count: teethSeeds, Workers: 1, StopAtFirst: true,
				Run: sim.Options{Mutation: m.Name}})
			if len(s.Failures) == 0 {
				t.Fatalf("%s (%s): not found in %d schedules", m.Name, m.Bug, s.Schedules)
			}
			f := s.Failures[0]
			if fl := f.Result.Failure; m.Stray && fl.First.Stray == fl.Second.Stray {
				t.Fatalf("%s: seed %d failed, but not between the fleet's layout and another: %v", m.Name, f.Schedule.Seed, fl)
			}
			t.Logf("%s found by seed %d after %d schedules: %v", m.Name, f.Schedule.Seed, s.Schedules, f.Result.Failure)
		})
	}
}
