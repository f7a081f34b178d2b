//go:build simbugs

package sim_test

import (
	"testing"

	"github.com/flaked/flaked/sim"
)

// teethSeeds bounds the seeds the simulator may need to find each bug
// (allkeys-allowed, the narrowest, by 5,532 through the evict-vs-claim
// pattern; reclaim-below-reservation by 5,354; RELIABILITY.md, Teeth).
const teethSeeds = 7000

// TestTeeth brings back each bug the design exists to prevent and shows
// the simulator finds it within teethSeeds schedules. A simulator that
// cannot find known bugs proves nothing. Run: go test -tags simbugs -run Teeth ./sim/
//
// Seeds run in chunks on every core (a Go mutation's switch is global, but
// one mutation is on at a time); the seed reported is the lowest failing
// one, as a run one seed at a time would find.
func TestTeeth(t *testing.T) {
	const chunk = 100
	for _, m := range sim.Mutations {
		t.Run(m.Name, func(t *testing.T) {
			off, err := m.Enable()
			if err != nil {
				t.Fatal(err)
			}
			defer off()
			for from := uint64(1); from <= teethSeeds; from += chunk {
				s := sim.Hunt(sim.HuntOptions{From: from, Count: min(chunk, teethSeeds-from+1), Run: sim.Options{Mutation: m.Name}})
				var found *sim.Found
				for i, f := range s.Failures {
					if fl := f.Result.Failure; m.Stray && fl.Kind != sim.KindStrayIn && fl.First.Stray == fl.Second.Stray {
						// A stray's bug must show as a stray let in, or as a
						// duplicate between its layout and the fleet's.
						t.Logf("%s: seed %d failed, but not by a stray: %v", m.Name, f.Schedule.Seed, fl)
						continue
					}
					if found == nil || f.Schedule.Seed < found.Schedule.Seed {
						found = &s.Failures[i]
					}
				}
				if found != nil {
					t.Logf("%s found by seed %d: %v", m.Name, found.Schedule.Seed, found.Result.Failure)
					return
				}
			}
			t.Fatalf("%s (%s): not found in %d schedules", m.Name, m.Bug, teethSeeds)
		})
	}
}
