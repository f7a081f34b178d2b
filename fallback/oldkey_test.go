package fallback_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
)

// Fault: an upgrade from the counter's old format, {ns}:counter as one
// decimal string holding the last value handed out, with a node of the old
// version still running. Guard: counter.lua replaces the string as if the
// key were missing: the old key ran at most its lead ahead of Redis TIME,
// and a missing counter starts at TIME + lead, above every value it handed
// out, even with no loss recorded; the key is a hash from then on, so the
// old script fails on it (WRONGTYPE) instead of counting on. A duplicate
// shows as a value at or below the old key's, or the old script's GET
// still succeeding.
func TestCounter_OldFormatKey_NewKeyStartsAbove(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 10*time.Second)
		l := flake.DefaultLayout()
		lead := int64(fallback.DefaultMaxLead / l.TimeUnit)
		// The highest the old key could hold: the last value of tick
		// TIME + lead.
		old := uint64(redisTick(t, rdb, l)+lead)<<l.BitsSequence | uint64(l.MaxSequence())
		if err := rdb.Set(ctx, "{flaked}:counter", strconv.FormatUint(old, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := redistest.ForgetLoss(ctx, rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		c := newCounter(t, rdb, fallback.Options{Layout: l})
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v := value(l, id); v <= old {
			t.Fatalf("first value of the new counter %d (tick %d) is not above the old key's %d (tick %d)",
				v, v>>l.BitsSequence, old, old>>l.BitsSequence)
		}
		// What the old counter.lua reads first.
		if err := rdb.Get(ctx, "{flaked}:counter").Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("GET of the counter key after the upgrade: %v, want WRONGTYPE (an old node would count on)", err)
		}
	})
}
