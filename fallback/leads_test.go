package fallback_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// Counters configured with different leads. The first fixes the fleet's
// lead in {ns}:meta; no value runs further ahead of Redis TIME than the
// smaller of it and the caller's, and after Redis loses a suffix the
// counter restarts above loss + the larger, so a counter with the default
// lead does not repeat what one with a longer lead handed out. (It did when
// each counter floored to its own lead.)
func TestGuard_CounterMixedLeads_NoRepeat(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := flake.DefaultLayout()
		ctx := idtest.Context(t, 20*time.Second)
		bigLead := newCounter(t, rdb, fallback.Options{MaxLead: 3 * time.Second, MinSegment: 16, MaxSegment: 16})
		first, err := bigLead.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		older := getCounter(ctx, t, rdb, l.BitsSequence)
		highest := first
		for range 500 {
			id, err := bigLead.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			highest = max(highest, id)
		}
		bigLead.Close()
		setCounter(ctx, t, rdb, l.BitsSequence, older)
		rdb.HSet(ctx, "{flaked}:meta", "server", "someoneelse")
		def := newCounter(t, rdb, fallback.Options{}) // default lead 1 s
		id, err := def.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id <= highest {
			t.Fatalf("after the rollback a default-lead counter starts at %+v, below %+v issued by the 3s-lead counter",
				l.Decompose(id), l.Decompose(highest))
		}
	})
}
