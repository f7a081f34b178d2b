package scale

import (
	"fmt"
	"testing"
)

// linearFactor is how far a per-node (per-connection, per-ID) cost at the
// large size may stray above the same cost at the small size before a
// scale test fails. Linear growth keeps the per-unit cost flat (ratio 1);
// growth with the square of the fleet would make it 10x at 10x the size.
// 3 leaves room for a noisy spell on a shared machine, which the rounds'
// alternation and the median of per-round ratios already damp.
const linearFactor = 3.0

// perUnitRatios is, for each round, the large size's cost per unit over
// the small size's: small[i] and large[i] are totals of round i, at n and
// m units.
func perUnitRatios(small, large []float64, n, m int) []float64 {
	out := make([]float64, 0, len(small))
	for i := range min(len(small), len(large)) {
		if small[i] <= 0 {
			continue // nothing measurable at the small size this round
		}
		out = append(out, (large[i]/float64(m))/(small[i]/float64(n)))
	}
	return out
}

// checkLinear fails t when the median of the per-round per-unit ratios
// exceeds linearFactor: the cost grew faster than the fleet.
func checkLinear(t *testing.T, what string, ratios []float64) {
	t.Helper()
	if len(ratios) == 0 {
		t.Errorf("%s: nothing measured at the small size in any round", what)
		return
	}
	r := median(ratios)
	fmt.Printf("bound: %s per unit, large over small: %.2fx (rounds: %s; fails above %.0fx)\n", what, r, fmtList(ratios), linearFactor)
	if r > linearFactor {
		t.Errorf("%s grows faster than linearly: per unit %.2fx at the large size (rounds: %s), bound %.0fx", what, r, fmtList(ratios), linearFactor)
	}
}
