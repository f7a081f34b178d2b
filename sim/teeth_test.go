//go:build simbugs

package sim_test

import (
	"testing"

	"github.com/flaked/flaked/sim"
)

// teethSeeds bounds the seeds the simulator may need to find each bug:
// the CI seed set (reclaim-below-reservation, the narrowest, by 5,354;
// counter-floor-time by 5,300; RELIABILITY.md, Teeth).
const teethSeeds = 10000

// foundBy is the lowest seed that finds each mutation, from a hunt from
// seed 1 (RELIABILITY.md, Teeth; "blocks:" with Options.Blocks). A run is
// a function of its seed, so that seed failing shows the hunt from seed 1
// finds the bug by then: the teeth test runs it first and hunts only when
// it no longer fails (a change to the code or to the simulator's draws
// moves the seeds), then logs the seed to record here.
var foundBy = map[string]uint64{
	"state-file-token":              106,
	"loss-floor-ignored":            181,
	"renew-across-loss":             3167,
	"reclaim-below-reservation":     5354,
	"issue-past-reservation":        21,
	"release-below-used":            51,
	"counter-fleet-wide":            12,
	"counter-floor-time":            15763,
	"split-brain-no-wait":           2,
	"identity-silent":               69,
	"allkeys-allowed":               324,
	"layout-unchecked":              5,
	"restore-by-stranger":           57,
	"seq-loss-jump-ignored":         12,
	"seq-restore-unwaited":          48,
	"seq-segment-across-restore":    5631,
	"mark-not-raised":               980,
	"replica-set-ignored":           1311,
	"mark-reset-on-restart":         1234,
	"mark-lowered-always":           1311,
	"mark-lowered-twice":            10,
	"wait-one-fewer":                10,
	"min-replicas-ignored":          530,
	"sentinel-run-id-unchecked":     6,
	"sentinel-replicas-ignored":     725,
	"sentinel-quorum":               681,
	"blocks:issue-past-reservation": 13,
	"blocks:release-below-used":     51,
}

// TestTeeth brings back each bug the design exists to prevent and shows
// the simulator finds it within teethSeeds schedules. A simulator that
// cannot find known bugs proves nothing. Run: go test -tags simbugs -run Teeth ./sim/
func TestTeeth(t *testing.T) {
	for _, m := range sim.Mutations {
		t.Run(m.Name, func(t *testing.T) {
			if m.Unfound != "" {
				t.Skipf("%s (%s): %s", m.Name, m.Bug, m.Unfound)
			}
			requireFound(t, m, m.Name, sim.Options{Mutation: m.Name, Sequences: m.Sequences})
		})
	}
}

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
			requireFound(t, m, "blocks:"+name, sim.Options{Mutation: name, Blocks: true})
		})
	}
}

// requireFound turns m on and fails the test unless a seed up to
// teethSeeds finds it: foundBy[key] first, else a hunt from seed 1.
func requireFound(t *testing.T, m sim.Mutation, key string, run sim.Options) {
	t.Helper()
	off, err := m.Enable()
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	bound := uint64(teethSeeds)
	if m.Seeds > 0 {
		bound = m.Seeds
	}
	if seed := foundBy[key]; seed > 0 && seed <= bound {
		if f := lowestFound(t, m, sim.HuntOptions{From: seed, Count: 1, Run: run}); f != nil {
			t.Logf("%s found by seed %d: %v", key, seed, f.Result.Failure)
			return
		}
		t.Logf("%s: seed %d (foundBy) no longer finds it; hunting from seed 1", key, seed)
	}
	// Seeds run in chunks on every core (a Go mutation's switch is global,
	// but one mutation is on at a time); the seed reported is the lowest
	// failing one, as a run one seed at a time would find.
	const chunk = 100
	for from := uint64(1); from <= bound; from += chunk {
		if f := lowestFound(t, m, sim.HuntOptions{From: from, Count: min(chunk, bound-from+1), Run: run}); f != nil {
			t.Logf("%s found by seed %d (record it in foundBy and RELIABILITY.md): %v", key, f.Schedule.Seed, f.Result.Failure)
			return
		}
	}
	t.Fatalf("%s (%s): not found in %d schedules", key, m.Bug, bound)
}

// lowestFound hunts o's seeds and returns the lowest that shows m's bug
// in the IDs or values issued (a panic does not count).
// A stray's bug must show as a stray let in, or as a duplicate between its
// layout and the fleet's; another failure does not count.
func lowestFound(t *testing.T, m sim.Mutation, o sim.HuntOptions) *sim.Found {
	s := sim.Hunt(o)
	var found *sim.Found
	for i, f := range s.Failures {
		if fl := f.Result.Failure; fl.Kind == "panic" {
			// A runaway or a crash of the run is not the bug's IDs.
			t.Logf("%s: seed %d failed, but by a panic, not by the IDs it issued: %v", m.Name, f.Schedule.Seed, fl)
			continue
		}
		if fl := f.Result.Failure; m.Stray && fl.Kind != sim.KindStrayIn && fl.First.Stray == fl.Second.Stray {
			t.Logf("%s: seed %d failed, but not by a stray: %v", m.Name, f.Schedule.Seed, fl)
			continue
		}
		if m.Requires != "" && f.Result.Coverage.Rules[m.Requires] == 0 {
			t.Logf("%s: seed %d failed, but no run of it counted %q: %v", m.Name, f.Schedule.Seed, m.Requires, f.Result.Failure)
			continue
		}
		if found == nil || f.Schedule.Seed < found.Schedule.Seed {
			found = &s.Failures[i]
		}
	}
	return found
}
