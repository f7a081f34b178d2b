package fallback_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// CheckLayout makes the comparison counter.lua makes first, so a counter
// node with another width or region fails its start instead of its first
// ID (the fault: a counter under another layout issuing IDs that equal
// the fleet's). The same layout is fine: a counter of the fleet's layout
// is refused nothing, the other one everything. (None stored:
// TestCounter_EmptyNamespace_NoRegistry.)
func TestCheckLayout_RefusesAnotherWidth(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		fleet, _ := flake.Settings{BitsMachineID: 8}.Layout()
		other, _ := flake.Settings{BitsMachineID: 8, BitsID: 53}.Layout()
		mine := newCounter(t, rdb, fallback.Options{Layout: fleet})
		if err := mine.CheckLayout(ctx); err != nil {
			t.Fatalf("the fleet's layout, before a segment: %v", err)
		}
		if _, err := mine.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mine.CheckLayout(ctx); err != nil {
			t.Fatalf("the fleet's own layout: %v", err)
		}
		theirs := newCounter(t, rdb, fallback.Options{Layout: other})
		err := theirs.CheckLayout(ctx)
		if !errors.Is(err, fallback.ErrLayoutMismatch) || !strings.Contains(err.Error(), fleet.String()) || !strings.Contains(err.Error(), other.String()) {
			t.Fatalf("CheckLayout of %v on %v's registry: %v; want ErrLayoutMismatch naming both", other, fleet, err)
		}
		// The script agrees: the other counter issues nothing.
		if id, err := theirs.NextID(ctx); !errors.Is(err, fallback.ErrLayoutMismatch) {
			t.Fatalf("NextID under %v = %d, %v; want ErrLayoutMismatch", other, id, err)
		}
	})
}
