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
	const hold = 3 * time.Second
	segment := rideOutCut(t, fallback.Options{Hold: hold, MinSegment: 1}, 1)
	if want := int(2 * hold / (10 * time.Millisecond)); segment < want*9/10 || segment > want*11/10 {
		t.Fatalf("segment size %d at 100 IDs/s: want about 2 x hold = %d", segment, want)
	}
}

// Fault: as above at 20,000 IDs/s, with what a node passes its counter
// (node.Options): the hold and the lead of its reach (reserve ahead 12 s,
// max lead 1 s) and segments up to what the counter machine ID issues in
// twice the hold. Redis hands out no value past its TIME + the lead, so
// with the counter's own lead (1 s) a buffer held at most a second of the
// counter machine ID's 25,600 IDs/s, 1.3 s at this rate, and a node in
// counter mode stopped that soon after Redis went away or its replicas
// stopped acknowledging. At this rate the lead cuts a segment sized for
// twice the hold short (it would reach 19 s of ticks ahead), so the
// prefetch starts when less than the hold is left, not at half. Every ID
// checked, as above. (The first segment is larger than a node's, so the
// first IDs need no fetch inside a step: the fake clock runs fetches only
// when it moves.)
func TestCounter_HoldAtHighRate_RidesOutRedisAway(t *testing.T) {
	const hold = 12 * time.Second
	segment := rideOutCut(t, fallback.Options{Hold: hold, MaxLead: 13 * time.Second, MinSegment: 2000, MaxSegment: 614_400}, 200)
	if want := int(2 * hold / (10 * time.Millisecond) * 200); segment < want*9/10 || segment > want*11/10 {
		t.Fatalf("segment size %d at 20,000 IDs/s: want about 2 x hold = %d", segment, want)
	}
}

// rideOutCut runs a counter of o on miniredis through a fault proxy,
// taking perStep IDs every 10 ms of a fake clock (Redis TIME moving with
// it): 30 s of steady use, then Redis cut off right when a prefetch starts
// and kept away for the hold less 100 ms, during which every ID must come
// from the buffer within a real-time bound, then Redis back. It checks
// every ID and returns the segment size of the steady state.
func rideOutCut(t *testing.T, o fallback.Options, perStep int) int {
	t.Helper()
	mr, _ := miniRedis(t)
	proxy := faultproxy.Start(t, mr.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	l := flake.DefaultLayout()
	start := time.Now()
	clk := clocktest.New(start)
	o.Clock = clk
	c := newCounter(t, rdb, o)
	// Redis TIME past the loss init records, and a counter already in
	// use, so that no fetch waits for ticks (a wait inside Advance would
	// wait for itself).
	redisAt := start.Add(10 * time.Second)
	mr.SetTime(redisAt)
	setCounter(context.Background(), t, rdb, l.BitsSequence, uint64(l.Tick(redisAt)-1)<<l.BitsSequence)
	c.Warm()
	clk.Advance(0) // the first segment
	var ids []uint64
	buf := make([]uint64, perStep)
	// take issues perStep IDs each 10 ms of the fake clock, n times, each
	// within a real-time bound: a caller that had to wait for Redis would
	// fail it. Before the clock moves (and runs a fetch the IDs started),
	// stop(fetching) may inject a fault and end the run.
	take := func(phase string, n int, stop func(fetching bool) bool) {
		t.Helper()
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			got, err := c.NextIDs(ctx, buf)
			cancel()
			ids = append(ids, buf[:got]...)
			if err != nil {
				t.Fatalf("%s, after %d IDs (buffered %d): %v", phase, len(ids), c.Stats().Buffered, err)
			}
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
			mr.SetTime(redisAt.Add(clk.Now().Sub(start)))
		}
	}
	take("steady", 3000, nil) // 30 s: segments sized to the rate
	segment := c.Stats().SegmentSize
	// On to the next prefetch, the least the counter holds, and cut Redis
	// off before that fetch runs.
	cut := false
	take("steady", 2*segment/perStep, func(fetching bool) bool {
		if fetching {
			t.Logf("Redis cut off with %d IDs buffered (segment size %d)", c.Stats().Buffered, c.Stats().SegmentSize)
			proxy.Cut()
			cut = true
		}
		return cut
	})
	if !cut {
		t.Fatalf("no prefetch in %d IDs", 2*segment)
	}
	take("Redis cut off", int((o.Hold-100*time.Millisecond)/(10*time.Millisecond)), nil)
	if st := c.Stats(); st.FetchErrors == 0 {
		t.Fatalf("no fetch failed while Redis was cut off: %+v", st)
	}
	proxy.Heal()
	take("Redis back", 2*segment/perStep, nil)
	idtest.Increasing(t, l, "counter IDs", ids)
	checkCounterIDs(t, l, ids)
	return segment
}
