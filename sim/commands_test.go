package sim_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/flaked/flaked/internal/simredis"
	"github.com/flaked/flaked/sim"
)

// The simulator's Redis implements what flaked sends and nothing more: a
// hunt over the simulator's kinds of runs (default schedules, blocks,
// sequences, every exposure kind) records every command the simulated
// servers ran, from clients and scripts; a command simredis does not
// implement fails here, naming the command, instead of showing up as an
// error reply a run may take for a fault. The list of commands recorded
// is what internal/simredis keeps (its doc).
func TestSimulatorSendsOnlyImplementedCommands(t *testing.T) {
	stop := simredis.RecordCommands()
	sim.Hunt(sim.HuntOptions{From: 1, Count: 60})
	sim.Hunt(sim.HuntOptions{From: 1, Count: 20, Run: sim.Options{Blocks: true}})
	sim.Hunt(sim.HuntOptions{From: 1, Count: 20, Run: sim.Options{Sequences: true}})
	for _, kind := range sim.Exposable {
		sim.Hunt(sim.HuntOptions{From: 1, Count: 5, Schedule: func(seed uint64) sim.Schedule {
			return sim.NewSchedule(seed).WithExposure(kind)
		}})
	}
	sent := stop()
	var names []string
	for name := range sent {
		names = append(names, name)
		cmd, _, _ := strings.Cut(name, " ")
		if !simredis.Implemented(cmd) {
			t.Errorf("the simulator sent %s (%d times), which internal/simredis does not implement", strings.ToUpper(name), sent[name])
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("no command recorded")
	}
	t.Logf("%d commands sent: %s", len(names), strings.Join(names, ", "))
}
