package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

const key = "{flaked}:counter"

// setCounter stores counter value v as counter.lua keeps it: a hash of
// its tick and sequence under a layout of bits sequence bits.
func setCounter(ctx context.Context, t testing.TB, rdb redis.UniversalClient, bits int, v uint64) {
	t.Helper()
	if err := rdb.HSet(ctx, key, "tick", v>>bits, "seq", v&(1<<bits-1)).Err(); err != nil {
		t.Fatal(err)
	}
}

// getCounter is the counter value the key holds.
func getCounter(ctx context.Context, t testing.TB, rdb redis.UniversalClient, bits int) uint64 {
	t.Helper()
	m, err := rdb.HMGet(ctx, key, "tick", "seq").Result()
	if err != nil || m[0] == nil || m[1] == nil {
		t.Fatalf("%s: %v, %v", key, m, err)
	}
	tick, err1 := strconv.ParseUint(m[0].(string), 10, 64)
	seq, err2 := strconv.ParseUint(m[1].(string), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %v", key, m)
	}
	return tick<<bits | seq
}

// TestMain drops go-redis's log lines (failed dials while Redis is down on
// purpose); failures are reported by the tests themselves.
func TestMain(m *testing.M) {
	redis.SetLogger(idtest.QuietRedis{})
	m.Run()
}

// realRedis starts a redis-server without persistence for the test.
func realRedis(t *testing.T) (*redistest.Server, redis.UniversalClient) {
	t.Helper()
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	return srv, srv.Client(t)
}

func miniRedis(t *testing.T) (*miniredis.Miniredis, redis.UniversalClient) {
	t.Helper()
	return redistest.Mini(t)
}

// backends runs f on a real redis-server and on miniredis.
func backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("redis-server", func(t *testing.T) {
		_, rdb := realRedis(t)
		f(t, rdb)
	})
	t.Run("miniredis", func(t *testing.T) {
		_, rdb := miniRedis(t)
		f(t, rdb)
	})
}

// newCounter returns a counter of o on rdb, closed with the test. Its
// namespace gets a registry first when it has none, as flaked init makes
// it (redistest.InitRegistry: a fleet that issued nothing yet), and the
// counter's layout when {ns}:meta is there without one (a test that
// planted it); a registry there is kept as it is. bareCounter makes none,
// for the tests of a namespace without a registry.
func newCounter(t testing.TB, rdb redis.UniversalClient, o fallback.Options) *fallback.Counter {
	t.Helper()
	c := bareCounter(t, rdb, o)
	initRegistry(t, rdb, c.Options().Namespace, c.Options().Layout)
	return c
}

// bareCounter returns a counter of o on rdb, closed with the test, and
// leaves Redis as it is.
func bareCounter(t testing.TB, rdb redis.UniversalClient, o fallback.Options) *fallback.Counter {
	t.Helper()
	c, err := fallback.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// initRegistry makes the registry of ns with layout l unless there is one
// (see newCounter). HGET, GET and SET only: internal/simredis runs it too.
func initRegistry(t testing.TB, rdb redis.UniversalClient, ns string, l flake.Layout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := contract.NewKeys(ns)
	err := rdb.HGet(ctx, keys.Meta, contract.MetaGeneration).Err()
	switch {
	case errors.Is(err, redis.Nil):
		err = redistest.InitRegistry(ctx, rdb, ns, l.String())
	case err == nil:
		if err = rdb.Get(ctx, keys.Layout).Err(); errors.Is(err, redis.Nil) {
			err = rdb.Set(ctx, keys.Layout, l.String(), 0).Err()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

func layout(t testing.TB, seq, machine int, unit time.Duration, start time.Time) flake.Layout {
	t.Helper()
	l, err := flake.NewLayout(seq, machine, unit, start)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// value is the counter value of a counter-mode ID.
func value(l flake.Layout, id uint64) uint64 { return id >> l.BitsMachineID }

func idOf(l flake.Layout, v uint64) uint64 {
	return v<<l.BitsMachineID | uint64(l.CounterMachineID())
}

// increasingEach fails unless each goroutine's IDs strictly increase, and
// returns them all.
func increasingEach(t *testing.T, l flake.Layout, results [][]uint64) []uint64 {
	t.Helper()
	var all []uint64
	for g, ids := range results {
		idtest.Increasing(t, l, fmt.Sprintf("goroutine %d", g), ids)
		all = append(all, ids...)
	}
	return all
}

// checkCounterIDs fails on no IDs, a duplicate, or an ID with a machine ID
// other than the counter's.
func checkCounterIDs(t *testing.T, l flake.Layout, ids []uint64) {
	t.Helper()
	if len(ids) == 0 {
		t.Fatal("no IDs to check")
	}
	idtest.Unique(t, l, ids)
	for _, id := range ids {
		if m := l.Decompose(id).MachineID; m != l.CounterMachineID() {
			t.Fatalf("ID %s has machine ID %d, want the counter's %d", idtest.Decoded(l, id), m, l.CounterMachineID())
		}
	}
}

func TestCounter_ManyNodes_NoDuplicates(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		const nodes, perNode, total = 4, 4, 1_000_000
		const each = total / (nodes * perNode)
		l := layout(t, 16, 8, 10*time.Millisecond, time.Time{})
		ctx := idtest.Context(t, 20*time.Second)
		counters := make([]*fallback.Counter, nodes)
		for i := range counters {
			counters[i] = newCounter(t, rdb, fallback.Options{Layout: l})
		}
		results := make([][]uint64, nodes*perNode)
		var wg sync.WaitGroup
		for g := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := counters[g%nodes]
				ids := make([]uint64, each)
				switch g % 3 {
				case 0:
					for i := range ids {
						id, err := c.NextID(ctx)
						if err != nil {
							t.Errorf("goroutine %d, ID %d: %v", g, i, err)
							return
						}
						ids[i] = id
					}
				default: // 1: NextIDs; 2: TryNextIDs first, NextIDs when it says no
					for i := 0; i < len(ids); {
						end := min(len(ids), i+1+(i%97))
						if g%3 == 2 && c.TryNextIDs(ids[i:end]) {
							i = end
							continue
						}
						n, err := c.NextIDs(ctx, ids[i:end])
						if err != nil {
							t.Errorf("goroutine %d, IDs %d..%d: %v", g, i, end, err)
							return
						}
						i += n
					}
				}
				results[g] = ids
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		checkCounterIDs(t, l, increasingEach(t, l, results))
		for i, c := range counters {
			st := c.Stats()
			if st.SegmentSize <= fallback.DefaultMinSegment || st.SegmentsFetched == 0 || st.LastError != nil {
				t.Errorf("node %d: stats %+v: want the segment size grown past %d with the rate", i, st, fallback.DefaultMinSegment)
			}
			t.Logf("node %d: %+v", i, st)
		}
	})
}

// A redis-server without persistence restarted in the middle of issuing
// loses the counter. The counter ran ahead of Redis TIME before (8 sequence
// bits at 1 ms ticks are 256k IDs/s, fewer than the test asks for), so a
// counter restarted at Redis TIME would repeat values: it must restart past
// the lead.
func TestCounter_RedisRestartWithoutPersistence_NoDuplicates(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{AOF: false})
	const nodes, perNode, before, total = 4, 2, 300_000, 600_000
	l := layout(t, 8, 8, time.Millisecond, time.Time{})
	ctx := idtest.Context(t, 25*time.Second)
	counters := make([]*fallback.Counter, nodes)
	for i := range counters {
		counters[i] = newCounter(t, srv.Client(t), fallback.Options{Layout: l, MaxSegment: 4096})
	}
	var issued, unavailable atomic.Int64
	half, restarted := make(chan struct{}), make(chan struct{})
	results := make([][]uint64, nodes*perNode)
	var wg sync.WaitGroup
	for g := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := counters[g%nodes]
			var ids []uint64
			defer func() { results[g] = ids }()
			for {
				id, err := c.NextID(ctx)
				if err != nil {
					if !errors.Is(err, fallback.ErrUnavailable) || ctx.Err() != nil {
						t.Errorf("goroutine %d: %v", g, err)
						return
					}
					unavailable.Add(1)
					select { // Redis is down: wait until it is back
					case <-restarted:
					case <-ctx.Done():
					}
					continue
				}
				ids = append(ids, id)
				n := issued.Add(1)
				if n == before {
					close(half)
				}
				if n >= total {
					return
				}
			}
		}()
	}
	select {
	case <-half:
	case <-ctx.Done():
		t.Fatalf("only %d IDs issued before the deadline", issued.Load())
	}
	fetched := make([]uint64, nodes)
	for i, c := range counters {
		fetched[i] = c.Stats().SegmentsFetched
	}
	high := getCounter(ctx, t, srv.Client(t), l.BitsSequence)
	ahead := int64(high>>l.BitsSequence) - redisTick(t, srv.Client(t), l)
	if lead := int64(fallback.DefaultMaxLead / l.TimeUnit); ahead < 1 || ahead > lead+1 {
		t.Errorf("before the restart the counter was %d ticks ahead of Redis TIME, want 1..%d", ahead, lead+1)
	}
	srv.Restart(t) // AOF off: the counter is gone
	close(restarted)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("counter was %d ticks ahead of Redis TIME when Redis restarted; %d NextID calls found Redis down",
		ahead, unavailable.Load())
	all := increasingEach(t, l, results)
	for i, c := range counters {
		if st := c.Stats(); st.SegmentsFetched <= fetched[i]+1 {
			t.Errorf("node %d fetched %d segments after the restart, want several: %+v", i, st.SegmentsFetched-fetched[i], st)
		}
	}
	checkCounterIDs(t, l, all)
}

// redisTick is the current tick of Redis TIME.
func redisTick(t *testing.T, rdb redis.UniversalClient, l flake.Layout) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return l.Tick(now)
}

func TestCounter_FlooredToRedisTime(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := flake.DefaultLayout()
		lead := int64(fallback.DefaultMaxLead / l.TimeUnit)
		ctx := idtest.Context(t, 10*time.Second)

		// A fresh counter (no key): Redis may have lost a counter that ran
		// up to the lead ahead, so it starts past the lead.
		before := l.Tick(time.Now())
		c := newCounter(t, rdb, fallback.Options{})
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after := l.Tick(time.Now())
		p := l.Decompose(id)
		if p.Tick < before || p.Tick < before+lead || p.Tick > after+lead+1 {
			t.Fatalf("first ID of a fresh counter %+v: tick %d, want >= current tick %d + lead %d and <= %d",
				p, p.Tick, before, lead, after+lead+1)
		}
		if p.MachineID != l.CounterMachineID() {
			t.Fatalf("machine ID %d, want %d", p.MachineID, l.CounterMachineID())
		}

		// A stale counter (far behind Redis TIME) is raised to the current
		// tick, not past the lead.
		setCounter(ctx, t, rdb, l.BitsSequence, 1000)
		if err := redistest.ForgetLoss(ctx, rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		before = l.Tick(time.Now())
		c2 := newCounter(t, rdb, fallback.Options{})
		id, err = c2.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after = l.Tick(time.Now())
		if p := l.Decompose(id); p.Tick < before || p.Tick > after || p.Sequence != 0 {
			t.Fatalf("first ID of a stale counter %+v: want tick in %d..%d, sequence 0", p, before, after)
		}
	})
}

// At the default layout (256 IDs per 10 ms tick) a burst runs the counter
// ahead of Redis TIME, but never more than MaxLead.
func TestCounter_LeadCapped(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := flake.DefaultLayout()
		const maxLead = 50 * time.Millisecond
		lead := int64(maxLead / l.TimeUnit)
		c := newCounter(t, rdb, fallback.Options{MaxLead: maxLead})
		ctx := idtest.Context(t, 10*time.Second)
		ids := make([]uint64, 3000)
		for i := range ids {
			id, err := c.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if p, now := l.Decompose(id), l.Tick(time.Now()); p.Tick > now+lead+1 {
				t.Fatalf("ID %d %+v is %d ticks ahead of the clock, max lead %d", i, p, p.Tick-now, lead)
			}
			ids[i] = id
		}
		idtest.Increasing(t, l, "ids", ids)
		if st := c.Stats(); st.Waits == 0 {
			t.Fatalf("stats %+v: want waits for ticks (3000 IDs exceed %d per tick)", st, l.IDsPerTick())
		}
	})
}

func TestCounter_SetFloor(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := flake.DefaultLayout()
		ctx := idtest.Context(t, 10*time.Second)
		mb := uint(l.BitsMachineID)
		next := func(c *fallback.Counter) uint64 {
			t.Helper()
			id, err := c.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}

		// Before the first fetch: the floor goes to Redis as the min value.
		setCounter(ctx, t, rdb, l.BitsSequence, 1000)
		if err := redistest.ForgetLoss(ctx, rdb, "flaked"); err != nil {
			t.Fatal(err)
		}
		floorTick := l.Tick(time.Now()) + 20
		floor, err := l.Compose(floorTick, 77, 3) // a flake ID of machine 3
		if err != nil {
			t.Fatal(err)
		}
		c := newCounter(t, rdb, fallback.Options{MinSegment: 1000, MaxSegment: 1000})
		c.SetFloor(floor)
		want, _ := l.Compose(floorTick, 77, l.CounterMachineID())
		if id := next(c); id != want {
			t.Fatalf("after SetFloor(%+v) got %+v, want %+v", l.Decompose(floor), l.Decompose(id), l.Decompose(want))
		}

		// Inside the buffered segment: values at or below are discarded.
		id0 := next(c)
		floor = id0 + 500<<mb // an ID this counter would issue
		c.SetFloor(floor)
		if id := next(c); id != floor+1<<mb {
			t.Fatalf("after SetFloor(%d) inside the buffer got %+v, want %+v", floor, l.Decompose(id), l.Decompose(floor+1<<mb))
		}
		// A lower floor changes nothing.
		last := next(c)
		c.SetFloor(id0)
		if id := next(c); id != last+1<<mb {
			t.Fatalf("a lower floor moved the counter: %d after %d", id, last)
		}

		// Inside the prefetched segment.
		for range 400 { // past 80% of the 1000
			last = next(c)
		}
		<-c.FetchDone()
		if st := c.Stats(); st.Buffered <= 1000 {
			t.Fatalf("stats %+v: want the next segment prefetched", st)
		}
		floor = last + 500<<mb // past the current segment, inside the next
		c.SetFloor(floor)
		if id := next(c); id != floor+1<<mb {
			t.Fatalf("after SetFloor(%+v) inside the prefetched segment got %+v, want %+v",
				l.Decompose(floor), l.Decompose(id), l.Decompose(floor+1<<mb))
		}

		// Beyond everything buffered: a new segment starts above it.
		floor = next(c) + 10_000<<mb
		c.SetFloor(floor)
		if id := next(c); id != floor+1<<mb {
			t.Fatalf("after SetFloor(%+v) beyond the buffer got %+v, want %+v",
				l.Decompose(floor), l.Decompose(id), l.Decompose(floor+1<<mb))
		}
	})
}

// In steady state NextID does not wait on Redis: the next segment is
// fetched in the background, so a Redis that stops answering goes unnoticed
// until the buffer is spent.
func TestCounter_PrefetchInBackground(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	// 2^16 values per tick: the lead cap never cuts a segment short.
	l := layout(t, 16, 8, 10*time.Millisecond, time.Time{})
	c := newCounter(t, rdb, fallback.Options{Layout: l, MinSegment: 1000, MaxSegment: 1000})
	ctx := idtest.Context(t, 10*time.Second)
	for range 850 {
		if _, err := c.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	<-c.FetchDone()
	srv.Pause()
	t.Cleanup(srv.Resume)
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	for i := range 1150 {
		if _, err := c.NextID(quick); err != nil {
			t.Fatalf("ID %d of the buffer with Redis paused: %v", i, err)
		}
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Fatalf("1150 buffered IDs took %v with Redis paused: NextID waited on Redis", d)
	}
	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	start = time.Now()
	_, err := c.NextID(short)
	if !errors.Is(err, fallback.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("buffer spent, Redis paused: got %v, want ErrUnavailable and the context's deadline", err)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Fatalf("NextID took %v with a 100ms context", d)
	}
	srv.Resume()
	if _, err := c.NextID(ctx); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
}

// With Redis gone and the buffer spent NextID fails with ErrUnavailable,
// never a guessed ID; it works again once Redis is back.
func TestCounter_RedisDown_Unavailable(t *testing.T) {
	type backend struct {
		rdb           redis.UniversalClient
		kill, restart func()
	}
	run := func(t *testing.T, b backend) {
		l := flake.DefaultLayout()
		ctx := idtest.Context(t, 15*time.Second)
		c := newCounter(t, b.rdb, fallback.Options{MinSegment: 100, MaxSegment: 100})
		first, err := c.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.kill()
		var ids []uint64
		for len(ids) < 1000 {
			var id uint64
			if id, err = c.NextID(ctx); err != nil {
				break
			}
			ids = append(ids, id)
		}
		if !errors.Is(err, fallback.ErrUnavailable) {
			t.Fatalf("Redis down, after %d buffered IDs: got %v, want ErrUnavailable", len(ids), err)
		}
		if len(ids) > 199 {
			t.Fatalf("%d IDs issued with Redis down, more than the buffer", len(ids))
		}
		t.Logf("%d buffered IDs, then: %v", len(ids), err)
		if st := c.Stats(); st.LastError == nil || st.FetchErrors == 0 {
			t.Fatalf("stats %+v: want the fetch error", st)
		}
		if _, err := c.NextID(ctx); !errors.Is(err, fallback.ErrUnavailable) {
			t.Fatalf("again: got %v, want ErrUnavailable", err)
		}
		b.restart()
		id, err := c.NextID(ctx)
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		ids = append([]uint64{first}, append(ids, id)...)
		idtest.Increasing(t, l, "ids", ids)
		if st := c.Stats(); st.LastError != nil {
			t.Fatalf("stats %+v: want the error cleared", st)
		}
	}
	t.Run("redis-server", func(t *testing.T) {
		redistest.Require(t)
		srv := redistest.Start(t, redistest.Options{})
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { rdb.Close() })
		run(t, backend{rdb, srv.Kill, func() { srv.Restart(t) }})
	})
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		redistest.MiniInfo(mr)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		t.Cleanup(func() { rdb.Close() })
		run(t, backend{rdb, mr.Close, func() {
			if err := mr.Restart(); err != nil {
				t.Fatal(err)
			}
			redistest.MiniInfo(mr) // a new identity, as a redis-server restart gets
		}})
	})
}

func TestCounter_Close(t *testing.T) {
	_, rdb := miniRedis(t)
	c := newCounter(t, rdb, fallback.Options{})
	ctx := idtest.Context(t, 10*time.Second)
	if _, err := c.NextID(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.NextID(ctx); !errors.Is(err, fallback.ErrClosed) {
		t.Fatalf("NextID after Close: %v, want ErrClosed", err)
	}
	if n, err := c.NextIDs(ctx, make([]uint64, 3)); n != 0 || !errors.Is(err, fallback.ErrClosed) {
		t.Fatalf("NextIDs after Close: %d, %v, want ErrClosed", n, err)
	}
	if c.TryNextIDs(make([]uint64, 1)) {
		t.Fatal("TryNextIDs issued after Close")
	}
	c.Close()
}

func TestNew_InvalidOptions(t *testing.T) {
	_, rdb := miniRedis(t)
	cases := []struct {
		name string
		o    fallback.Options
		want string
	}{
		{"namespace", fallback.Options{Namespace: "a b"}, "namespace"},
		{"min segment", fallback.Options{MinSegment: -1}, "valid range is 1..65536"},
		{"min above max", fallback.Options{MinSegment: 100, MaxSegment: 10}, "valid range is 1..10"},
		{"max segment", fallback.Options{MaxSegment: fallback.SegmentLimit + 1}, "valid range is 1..16777216"},
		{"negative max segment", fallback.Options{MaxSegment: -5}, "valid range is 1..16777216"},
		{"negative max lead", fallback.Options{MaxLead: -time.Second}, "valid range is 0..1h0m0s"},
		{"max lead", fallback.Options{MaxLead: 2 * time.Hour}, "valid range is 0..1h0m0s"},
		{"hold", fallback.Options{Hold: 500 * time.Millisecond}, "hold 500ms: valid range is 1s..1h0m0s"},
		{"layout", fallback.Options{Layout: flake.Layout{BitsSequence: 31}}, "valid range is 1..30"},
		{"layout time bits", fallback.Options{Layout: flake.Layout{BitsTime: 20, BitsSequence: 8}}, "time bits 20"},
		{"epoch ahead", fallback.Options{Layout: flake.Layout{StartTime: time.Now().Add(time.Hour)}}, "valid range is 0.."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fallback.New(rdb, tc.o)
			if !errors.Is(err, fallback.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidOptions naming %q", err, tc.want)
			}
		})
	}
	if _, err := fallback.New(nil, fallback.Options{}); !errors.Is(err, fallback.ErrInvalidOptions) {
		t.Fatalf("nil client: %v", err)
	}
	c, err := fallback.New(rdb, fallback.Options{MinSegment: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options(); o.MaxSegment != 100_000 || o.MaxLead != time.Second || o.Hold != fallback.DefaultHold || o.Namespace != "flaked" || !o.Layout.Equal(flake.DefaultLayout()) {
		t.Fatalf("defaults: %+v", o)
	}
}

// Counter values reach 2^62, beyond the 2^53 a Lua number holds exactly.
// Odd values near a tick boundary must come back bit for bit.
func TestCounter_LargeValues_RoundTrip(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	layouts := []struct {
		name  string
		seq   int
		mach  int
		unit  time.Duration
		start time.Time
	}{
		{"seq20-machine8-1ms", 20, 8, time.Millisecond, now.Add(-300 * 24 * time.Hour)}, // values ~2^54
		{"seq20-machine8-10ms", 20, 8, 10 * time.Millisecond, time.Time{}},              // values ~2^52
		{"seq30-machine1-1ms", 30, 1, time.Millisecond, now.Add(-40 * 24 * time.Hour)},  // values ~2^61.7
	}
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, tl := range layouts {
			t.Run(tl.name, func(t *testing.T) {
				l := layout(t, tl.seq, tl.mach, tl.unit, tl.start)
				ctx := idtest.Context(t, 10*time.Second)
				// Half the 1 s lead ahead: inside the lead, and ahead of Redis
				// TIME however slow the test runs.
				tick := l.Tick(time.Now()) + int64(fallback.DefaultMaxLead/l.TimeUnit)/2
				v0 := uint64(tick)<<l.BitsSequence | uint64(l.MaxSequence()-2)
				setCounter(ctx, t, rdb, l.BitsSequence, v0)
				if err := redistest.ForgetLoss(ctx, rdb, "flaked"); err != nil {
					t.Fatal(err)
				}
				// Each layout is its own fleet: forget the previous one's.
				if err := rdb.Del(ctx, "{flaked}:layout").Err(); err != nil {
					t.Fatal(err)
				}
				c := newCounter(t, rdb, fallback.Options{Layout: l, MinSegment: 8, MaxSegment: 8})
				ids := make([]uint64, 8)
				if n, err := c.NextIDs(ctx, ids); err != nil || n != 8 {
					t.Fatalf("NextIDs: %d, %v", n, err)
				}
				for k, id := range ids {
					want := v0 + 1 + uint64(k)
					p := l.Decompose(id)
					if value(l, id) != want || p.MachineID != l.CounterMachineID() ||
						uint64(p.Tick) != want>>l.BitsSequence || uint64(p.Sequence) != want&uint64(l.MaxSequence()) {
						t.Fatalf("ID %d: value %d %+v, want value %d (tick %d, seq %d)", k, value(l, id), p,
							want, want>>l.BitsSequence, want&uint64(l.MaxSequence()))
					}
				}
				// The key holds the last value handed out: the end of this
				// segment or, once the prefetch ran, of the next one.
				if got := getCounter(ctx, t, rdb, l.BitsSequence); got != v0+8 && got != v0+16 {
					t.Fatalf("%s holds %d, want %d or %d", key, got, v0+8, v0+16)
				}
				// An odd floor far into the tick comes back exactly.
				floorV := v0 + 1000 + 12345
				c.SetFloor(idOf(l, floorV) - 1) // a lower machine ID at the same (tick, seq)
				id, err := c.NextID(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if value(l, id) != floorV {
					t.Fatalf("after the floor: value %d %+v, want %d", value(l, id), l.Decompose(id), floorV)
				}
				t.Logf("values around %d (2^%.1f) exact", floorV, log2(floorV))
			})
		}
	})
}

func log2(v uint64) float64 {
	n := 0.0
	for f := float64(v); f >= 2; f /= 2 {
		n++
	}
	return n
}

// counter.lua keeps values past 2^53 exact as (tick, seq) pairs: random
// values over many layouts round-trip through the key, the floor and the
// reply.
func TestCounterScript_ExactValues(t *testing.T) {
	script := redis.NewScript(contract.Counter)
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 20*time.Second)
		rng := rand.New(rand.NewPCG(1, 2))
		run := func(n int64, epochUs, bits, lead int64, minValue uint64) *redis.Cmd {
			keys, argv := contract.CounterArgs{Keys: contract.NewKeys("flaked"), Size: n, EpochUs: epochUs, TickUs: 1000,
				SeqBits: int(bits), Lead: lead, MinTick: int64(minValue >> bits), MinSeq: int64(minValue & (1<<bits - 1)),
				Layout: fmt.Sprintf("test-%d", bits), EventsMaxLen: 1000, CounterID: 1<<bits - 1, Host: "h", PID: 1,
				Generation: "g"}.KeysArgv()
			return script.Run(ctx, rdb, keys, argv...)
		}
		// The first run creates {ns}:meta, recording a possible loss now;
		// moved back, so only the arithmetic is tested here.
		if err := run(1, 0, 8, 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, "{flaked}:meta", "loss_ms", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HDel(ctx, "{flaked}:meta", "counter_lead").Err(); err != nil { // the next run's lead
			t.Fatal(err)
		}
		for _, bits := range []int{1, 8, 16, 20, 24, 30} {
			if err := rdb.Del(ctx, "{flaked}:layout").Err(); err != nil {
				t.Fatal(err)
			}
			// Redis ticks near the top of what the value can hold.
			base := min(int64(1)<<(62-bits)-1<<22, 1_000_000_000_000)
			epochUs := time.Now().UnixMicro() - base*1000
			const lead = 1 << 21
			mask := uint64(1)<<bits - 1
			for i := range 60 {
				tick := uint64(base + 10_000 + rng.Int64N(1000))
				v := tick<<bits | rng.Uint64N(mask+1)
				if i%10 == 0 {
					v = tick<<bits | mask // at the tick boundary
				}
				n := 1 + rng.Int64N(5000)
				minValue, wantFirst := uint64(0), v+1
				if i%3 == 1 {
					minValue = v + 1 + rng.Uint64N(lead/2<<bits)
					wantFirst = minValue
				}
				setCounter(ctx, t, rdb, bits, v)
				res, err := run(n, epochUs, int64(bits), lead, minValue).Slice()
				if err != nil {
					t.Fatal(err)
				}
				wantLast := wantFirst + uint64(n) - 1
				pair := func(a, b any) uint64 { return uint64(a.(int64))<<bits | uint64(b.(int64)) }
				if len(res) != 8 || res[0] != "OK" || pair(res[1], res[2]) != wantFirst || pair(res[3], res[4]) != wantLast {
					t.Fatalf("bits %d, stored %d, n %d, min %d: got %v, want first %d last %d", bits, v, n, minValue, res, wantFirst, wantLast)
				}
				if got := getCounter(ctx, t, rdb, bits); got != wantLast {
					t.Fatalf("bits %d: key holds %d, want %d", bits, got, wantLast)
				}
			}
		}
		// Garbage in the key is an error, not a guess.
		if err := rdb.Del(ctx, "{flaked}:layout").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, key, "tick", "12x", "seq", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := run(1, 0, 8, 0, 0).Result(); err == nil || !strings.Contains(err.Error(), "not a counter value") {
			t.Fatalf("garbage counter: %v", err)
		}
	})
}

// A counter refuses a fleet whose layout differs (its IDs could equal the
// fleet's flake IDs), writes a counter_init audit event when it creates the
// counter key, and LastTick bounds every ID it handed out.
func TestCounter_LayoutAgreement_InitEvent_LastTick(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := idtest.Context(t, 10*time.Second)
		c := newCounter(t, rdb, fallback.Options{Host: "h1", PID: 7})
		if got := c.LastTick(); got != -1 {
			t.Fatalf("LastTick before any fetch = %d, want -1", got)
		}
		var maxTick int64
		for range 500 {
			id, err := c.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			maxTick = max(maxTick, flake.DefaultLayout().Decompose(id).Tick)
		}
		if lt := c.LastTick(); lt < maxTick {
			t.Fatalf("LastTick %d is below the tick %d of an issued ID", lt, maxTick)
		}
		if got, _ := rdb.Get(ctx, "{flaked}:layout").Result(); got != flake.DefaultLayout().String() {
			t.Fatalf("layout key = %q, want the counter's layout set", got)
		}
		evs, err := rdb.XRange(ctx, "{flaked}:events", "-", "+").Result()
		if err != nil || len(evs) != 1 || evs[0].Values["type"] != "counter_init" || evs[0].Values["host"] != "h1" ||
			evs[0].Values["mid"] != strconv.Itoa(flake.DefaultLayout().CounterMachineID()) {
			t.Fatalf("events = %v, %v; want one counter_init by h1", evs, err)
		}

		other := layout(t, 10, 12, 10*time.Millisecond, flake.DefaultStartTime)
		c2 := newCounter(t, rdb, fallback.Options{Layout: other})
		if _, err := c2.NextID(ctx); !errors.Is(err, fallback.ErrUnavailable) || !strings.Contains(err.Error(), "differs from the fleet layout") {
			t.Fatalf("counter with another layout: err = %v, want a layout refusal", err)
		}
	})
}

// Warm fetches a segment before any caller asks, once, and never blocks.
func TestCounter_Warm(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newCounter(t, rdb, fallback.Options{})
		c.Warm()
		c.Warm() // no second fetch while one is on its way or buffered
		poll.UntilNil(t, 5*time.Second, "IDs buffered after Warm", func() error {
			if st := c.Stats(); st.Buffered == 0 {
				return fmt.Errorf("nothing buffered: %+v", st)
			}
			return nil
		})
		if st := c.Stats(); st.SegmentsFetched != 1 || st.Waits != 0 {
			t.Fatalf("after Warm: %+v, want one segment and no waits", st)
		}
		if _, err := c.NextID(idtest.Context(t, 5*time.Second)); err != nil || c.Stats().Waits != 0 {
			t.Fatalf("first NextID after Warm: %v, waits %d", err, c.Stats().Waits)
		}
	})
}

// A caller that joins a fetch started earlier (here by Warm while Redis
// was paused) and sees it fail tries once more with a fetch of its own,
// rather than reporting a failure that may predate it: with Redis back by
// then, it gets an ID. (A fetch the caller started itself that fails is
// reported: TestCounter_RedisDown_Unavailable.)
func TestCounter_JoinedFetchFailed_RetriesOnce(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c := newCounter(t, rdb, fallback.Options{})
	srv.Pause()
	t.Cleanup(srv.Resume)
	c.Warm() // in flight; fails at its read timeout, Redis paused
	resumed := time.AfterFunc(400*time.Millisecond, srv.Resume)
	defer resumed.Stop()
	start := time.Now()
	if _, err := c.NextID(idtest.Context(t, 5*time.Second)); err != nil {
		t.Fatalf("NextID after %v (Redis back at 400ms): %v", time.Since(start), err)
	}
	if st := c.Stats(); st.SegmentsFetched != 1 {
		t.Fatalf("stats %+v: want exactly one segment fetched", st)
	}
}
