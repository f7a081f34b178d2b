package sim_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/flaked/flaked/sim"
)

func TestZZDebugSeq(t *testing.T) {
	seed, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	f, _ := os.Create("/work/long/seqdebug.log")
	defer f.Close()
	s := sim.NewSchedule(seed)
	t.Logf("schedule: %+v", s)
	res := sim.Run(s, sim.Options{Sequences: true, Log: f})
	t.Logf("failure: %+v", res.Failure)
}
