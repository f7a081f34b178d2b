package fallback_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/simredis"
)

// stepClock is a clock.Stepped clock the test moves: the counter's waits
// move it instead of sleeping.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time                                 { return c.t }
func (c *stepClock) Monotonic() time.Duration                       { return time.Duration(c.t.UnixNano()) }
func (c *stepClock) AfterFunc(time.Duration, func()) clock.Timer    { return stopped{} }
func (c *stepClock) Sleep(_ context.Context, d time.Duration) error { c.t = c.t.Add(d); return nil }

type stopped struct{}

func (stopped) Stop() bool { return true }

// Fault: Redis fails over to a replica that missed the last counter
// segments and whose clock is behind the old master's (by 500 ms, within
// the 1 s guard.lua allows for), a fault the simulator drives: the loss
// moment read on the new master's clock is earlier than the TIME the old
// one handed values out by, so loss + lead alone would not cover them.
// Guard: counter.lua floors to
// loss + the Redis clocks' skew + lead. A duplicate shows as the counter
// after the failover starting at or below the last value before it.
func TestGuard_FailoverToAServerBehind_CounterAboveEarlierIDs(t *testing.T) {
	clk := &stepClock{t: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
	skew := time.Duration(0)
	srv := simredis.New(func() time.Time { return clk.t.Add(skew) }, rand.New(rand.NewPCG(1, 2)))
	rdb := srv.Client()
	o := fallback.Options{MaxLead: time.Second, MinSegment: 1000, MaxSegment: 1000, Clock: clk}
	ctx := context.Background()
	initRegistry(t, rdb, fallback.DefaultNamespace, flake.DefaultLayout())

	c1, err := fallback.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.NextID(ctx); err != nil { // the first segment of a new fleet
		t.Fatal(err)
	}
	clk.t = clk.t.Add(5 * time.Second)
	replica := srv.Snapshot() // the replica stops here
	c1.SetFloor(0)
	o2 := o
	o2.MinSegment, o2.MaxSegment = 30000, 30000
	c2, err := fallback.New(rdb, o2) // one big segment: up to Redis TIME + lead
	if err != nil {
		t.Fatal(err)
	}
	var highest uint64
	for range 25000 { // 256 per tick: about 98 ticks ahead of TIME, near the lead
		id, err := c2.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		highest = max(highest, id)
	}
	c1.Close()
	c2.Close()

	skew = -500 * time.Millisecond
	srv.Promote(replica)
	c3, err := fallback.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	id, err := c3.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := flake.DefaultLayout()
	if id <= highest {
		t.Fatalf("after a failover to a server 500 ms behind, the counter starts at %+v, not above %+v handed out before",
			l.Decompose(id), l.Decompose(highest))
	}
}
