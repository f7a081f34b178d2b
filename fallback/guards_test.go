package fallback_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// Fault: Redis lost a suffix of its writes to the counter key but kept it
// (and {flaked}:meta): a replica that missed the last INCRs was promoted,
// or a restart from an older snapshot. Simulated by setting the key back
// to a value it held earlier and changing the server identity {flaked}:meta
// was written under. Guard: guard.lua sees the identity change and records
// loss_ms; counter.lua then floors a present key to loss_ms + lead, above
// every value handed out before (none was beyond Redis TIME + lead). A
// duplicate shows as the new counter's first ID not above every ID issued
// before the rollback (it would hand the same values out again). The lead
// is long (3 s) so that, without the loss floor, Redis TIME alone would not
// lift the rolled-back key past the values already issued.
func TestGuard_CounterRolledBack_NewCounterAboveEveryEarlierID(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := flake.DefaultLayout()
		ctx := idtest.Context(t, 20*time.Second)
		o := fallback.Options{MaxLead: 3 * time.Second, MinSegment: 16, MaxSegment: 16, Host: "old"}
		c1 := newCounter(t, rdb, o)
		first, err := c1.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		older := getCounter(ctx, t, rdb, l.BitsSequence) // the key after the first segment
		highest := first
		for range 500 { // many segments past the one the key goes back to
			id, err := c1.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			highest = max(highest, id)
		}
		granted := getCounter(ctx, t, rdb, l.BitsSequence) // the last value Redis handed out
		c1.Close()
		if value(l, highest) > granted {
			t.Fatalf("issued value %d above the key %d", value(l, highest), granted)
		}
		// Redis loses the later writes: the key is back at its older value,
		// and the server {flaked}:meta names is not this one.
		setCounter(ctx, t, rdb, l.BitsSequence, older)
		if err := rdb.HSet(ctx, "{flaked}:meta", "server", "someoneelse").Err(); err != nil {
			t.Fatal(err)
		}

		o.Host = "new"
		c2 := newCounter(t, rdb, o)
		id, err := c2.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id <= highest || value(l, id) <= granted {
			t.Fatalf("after the rollback the first ID is %d %+v (value %d); before it, ID %d %+v was issued and value %d granted: duplicates",
				id, l.Decompose(id), value(l, id), highest, l.Decompose(highest), granted)
		}
		for range 200 {
			next, err := c2.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if next <= id {
				t.Fatalf("ID %d follows %d", next, id)
			}
			id = next
		}
		msgs, err := rdb.XRange(ctx, "{flaked}:events", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range msgs {
			if m.Values["type"] == "dataloss" && m.Values["previous_server"] == "someoneelse" && m.Values["host"] == "new" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no dataloss event by the new counter naming the previous server; events: %v", msgs)
		}
	})
}
