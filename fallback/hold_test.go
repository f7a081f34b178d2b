package fallback_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/idtest"
)

// Fault: Redis cut off, at the worst moment (the buffer down to what the
// prefetch point leaves), for almost Options.Hold while the counter issues
// at a steady rate. The counter holds at least Hold of IDs, so no caller
// waits through it; every ID before, during and after is unique and
// increasing (a segment handed out twice, or a buffer reused after Redis
// is back, would repeat one).
func TestCounter_Hold_RidesOutRedisAway(t *testing.T) {
	mr, _ := miniRedis(t)
	proxy := faultproxy.Start(t, mr.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	l := flake.DefaultLayout()
	clk := clocktest.New(time.Now())
	const hold = 3 * time.Second
	c := newCounter(t, rdb, fallback.Options{Hold: hold, MinSegment: 1, Clock: clk})
	// Redis TIME past the loss init records, and a counter already in
	// use, so that no fetch waits for ticks (a wait inside Advance would
	// wait for itself).
	redisNow := time.Now().Add(10 * time.Second)
	mr.SetTime(redisNow)
	setCounter(context.Background(), t, rdb, l.BitsSequence, uint64(l.Tick(redisNow)-1)<<l.BitsSequence)
	c.Warm()
	clk.Advance(0) // the first segment
	var ids []uint64
	// take issues one ID each 10 ms of the fake clock (100 IDs/s), n
	// times, each within a real-time bound: a caller that had to wait for
	// Redis would fail it. Before the clock moves (and runs a fetch the ID
	// started), stop(fetching) may inject a fault and end the run.
	take := func(phase string, n int, stop func(fetching bool) bool) {
		t.Helper()
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			id, err := c.NextID(ctx)
			cancel()
			if err != nil {
				t.Fatalf("%s, after %d IDs (buffered %d): %v", phase, len(ids), c.Stats().Buffered, err)
			}
			ids = append(ids, id)
			if stop != nil {
				fetching := false
				select {
				case <-c.FetchDone():
				default:
					fetching = true
				}
				if stop(fetching) {
					return
				}
			}
			clk.Advance(10 * time.Millisecond)
		}
	}
	take("steady", 3000, nil) // 30 s: segments sized to the rate
	st := c.Stats()
	if want := int(2 * hold / (10 * time.Millisecond)); st.SegmentSize < want*9/10 || st.SegmentSize > want*11/10 {
		t.Fatalf("segment size %d at 100 IDs/s: want about 2 x hold = %d", st.SegmentSize, want)
	}
	// On to the next prefetch, the least the counter holds, and cut Redis
	// off before that fetch runs.
	cut := false
	take("steady", 2*st.SegmentSize, func(fetching bool) bool {
		if fetching {
			t.Logf("Redis cut off with %d IDs buffered (segment size %d)", c.Stats().Buffered, c.Stats().SegmentSize)
			proxy.Cut()
			cut = true
		}
		return cut
	})
	if !cut {
		t.Fatalf("no prefetch in %d IDs", 2*st.SegmentSize)
	}
	take("Redis cut off", int((hold-100*time.Millisecond)/(10*time.Millisecond)), nil)
	if st := c.Stats(); st.FetchErrors == 0 {
		t.Fatalf("no fetch failed while Redis was cut off: %+v", st)
	}
	proxy.Heal()
	take("Redis back", 2*st.SegmentSize, nil)
	idtest.Increasing(t, l, "counter IDs", ids)
	checkCounterIDs(t, l, ids)
}
