package fallback_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// What `flaked plan` prints as counter mode's capacity
// (Layout.CounterIDsPerSecond) is what counter.lua hands out, to all the
// nodes of a fleet together: with Redis TIME held still, every second it
// moves lets the counter give exactly that many more values, however large
// the segments asked (here the largest the script takes).
func TestCounter_Capacity_IsCounterIDsPerSecond(t *testing.T) {
	mr, rdb := miniRedis(t)
	ctx := idtest.Context(t, 20*time.Second)
	now := time.Now()
	mr.SetTime(now) // Redis TIME stands still until the test moves it
	l, err := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	script := redis.NewScript(contract.Counter)
	keys, argv := contract.CounterArgs{Keys: contract.NewKeys("flaked"), Size: fallback.SegmentLimit, EpochUs: l.StartTime.UnixMicro(),
		TickUs: float64(l.TimeUnit / time.Microsecond), SeqBits: l.BitsSequence, Lead: int64(fallback.DefaultMaxLead / l.TimeUnit),
		Layout: l.String(), EventsMaxLen: 100, CounterID: l.CounterMachineID(), Host: "h", PID: 1, Generation: "g"}.KeysArgv()
	take := func() int64 { // every value the script gives at this TIME
		var n int64
		for {
			res, err := script.Run(ctx, rdb, keys, argv...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if res[0] != "OK" {
				return n
			}
			first := uint64(res[1].(int64))<<l.BitsSequence | uint64(res[2].(int64))
			last := uint64(res[3].(int64))<<l.BitsSequence | uint64(res[4].(int64))
			if id := last<<l.BitsMachineID | uint64(l.CounterMachineID()); id >= 1<<53 {
				t.Fatalf("counter ID %d >= 2^53", id)
			}
			n += int64(last-first) + 1
		}
	}
	// A new counter starts after the loss floor (a missing {ns}:meta is a
	// loss: 1 s of Redis clocks' skew + the lead ahead): wait that out.
	for i := 0; take() == 0; i++ {
		if i == 5 {
			t.Fatal("the counter gave nothing in 5 s of Redis TIME")
		}
		now = now.Add(time.Second)
		mr.SetTime(now)
	}
	for sec := 1; sec <= 3; sec++ {
		now = now.Add(time.Second)
		mr.SetTime(now)
		if got := take(); float64(got) != l.CounterIDsPerSecond() {
			t.Fatalf("second %d of Redis TIME: %d counter values, CounterIDsPerSecond says %v", sec, got, l.CounterIDsPerSecond())
		}
	}
}
