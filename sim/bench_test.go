package sim_test

import (
	"testing"

	"github.com/flaked/flaked/sim"
)

// BenchmarkRun runs schedules one after another on one core: ns/op is the
// cost of one schedule (scripts/sim runs them on every core).
func BenchmarkRun(b *testing.B) {
	var ids, scripts int
	for i := 0; i < b.N; i++ {
		res := sim.Run(sim.NewSchedule(uint64(i%1000+1)), sim.Options{})
		ids += res.IDs
		scripts += int(res.Scripts)
	}
	b.ReportMetric(float64(ids)/float64(b.N), "IDs/op")
	b.ReportMetric(float64(scripts)/float64(b.N), "scripts/op")
}
