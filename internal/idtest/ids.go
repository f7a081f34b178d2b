package idtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flaked/flaked/flake"
)

// shown is how many repeated IDs Unique lists at the most.
const shown = 10

// Decoded is id with its parts under l, as the checks print it.
func Decoded(l flake.Layout, id uint64) string {
	return fmt.Sprintf("%d %+v", id, l.Decompose(id))
}

// Unique fails tb (Fatalf) if an ID occurs more than once in ids, with the
// number of repeats (an ID three times is two) and the first ten, smallest
// first, decoded under l. It does not change ids.
func Unique(tb testing.TB, l flake.Layout, ids []uint64) {
	tb.Helper()
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	var dups []string
	n := 0
	for i := 1; i < len(sorted); i++ {
		if sorted[i] != sorted[i-1] {
			continue
		}
		n++
		if len(dups) < shown {
			dups = append(dups, Decoded(l, sorted[i]))
		}
	}
	if n > 0 {
		tb.Fatalf("%d duplicate IDs among %d (the first %d):\n%s", n, len(ids), len(dups), strings.Join(dups, "\n"))
	}
}

// Increasing fails tb (Fatalf) unless every ID in ids is above the one
// before it, naming the first that is not and the one before it, both
// decoded under l. name says whose IDs they are; it may be empty.
func Increasing(tb testing.TB, l flake.Layout, name string, ids []uint64) {
	tb.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			prefix := ""
			if name != "" {
				prefix = name + ": "
			}
			tb.Fatalf("%sID %s (index %d) follows %s: not strictly increasing",
				prefix, Decoded(l, ids[i]), i, Decoded(l, ids[i-1]))
			return
		}
	}
}
