package seq

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

func newSeqs(t testing.TB, rdb redis.UniversalClient) *Sequences {
	t.Helper()
	// flaked init's registry, as for every fleet, unless one exists: one
	// made before a restart must keep what the restart did to it.
	ctx := context.Background()
	if rdb.Exists(ctx, contract.NewKeys("t").Meta).Val() == 0 {
		if err := redistest.InitRegistry(ctx, rdb, "t", flake.DefaultLayout().String()); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(rdb, Options{Namespace: "t", Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// taker hands values out of one Sequences on several goroutines and keeps
// what each goroutine got, in order.
type taker struct {
	mu  sync.Mutex
	got [][]int64
}

// run takes values of tag from s on g goroutines until stop is closed or
// s is closed; each goroutine's values must increase strictly.
func (tk *taker) run(t testing.TB, s *Sequences, tag string, g int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			defer func() {
				tk.mu.Lock()
				tk.got = append(tk.got, mine)
				tk.mu.Unlock()
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, err := s.Next(context.Background(), tag)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if len(mine) > 0 && v <= mine[len(mine)-1] {
					t.Errorf("value %d after %d in one goroutine", v, mine[len(mine)-1])
				}
				mine = append(mine, v)
			}
		}()
	}
	return &wg
}

// check fails on any value handed out twice, and returns the values
// sorted.
func (tk *taker) check(t testing.TB) []int64 {
	t.Helper()
	var all []int64
	for _, g := range tk.got {
		all = append(all, g...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("value %d handed out twice (%d values)", all[i], len(all))
		}
	}
	return all
}

// Fault covered: clean restarts of every process under load must leave
// (almost) no gap, and never hand a value out twice: give-back must not
// return values another process holds. Three processes share one tag;
// each is closed and replaced in turn, three rounds, while the others
// keep taking.
func TestSequences_DenseAcrossCleanRestarts(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := idtest.Context(t, time.Minute)
	admin := newSeqs(t, rdb)
	if err := admin.Create(ctx, "orders", TagOptions{Step: 200}); err != nil {
		t.Fatal(err)
	}
	tk := &taker{}
	type proc struct {
		s    *Sequences
		stop chan struct{}
		wg   *sync.WaitGroup
	}
	start := func() *proc {
		p := &proc{s: newSeqs(t, rdb), stop: make(chan struct{})}
		p.wg = tk.run(t, p.s, "orders", 4, p.stop)
		return p
	}
	procs := []*proc{start(), start(), start()}
	for round := range 3 {
		for i := range procs {
			time.Sleep(150 * time.Millisecond)
			p := procs[i]
			close(p.stop)
			p.wg.Wait()
			if err := p.s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			procs[i] = start()
			_ = round
		}
	}
	time.Sleep(100 * time.Millisecond)
	for _, p := range procs {
		close(p.stop)
		p.wg.Wait()
		if err := p.s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	all := tk.check(t)
	info, err := Info(ctx, rdb, "t", "orders")
	if err != nil {
		t.Fatal(err)
	}
	// Every value from 1 to high is handed out, or waits in the free list
	// for the next process; the rest is the gap.
	span := info.High
	skipped := span - int64(len(all)) - info.FreeCount
	t.Logf("%d values, high %d, free %d (%s), skipped %d, given back %d, lost %d",
		len(all), info.High, info.FreeCount, info.Free, skipped, info.GivenBack, info.Lost)
	if len(all) < 10_000 {
		t.Fatalf("only %d values taken", len(all))
	}
	if skipped != 0 || info.Lost != 0 {
		t.Fatalf("%d values skipped (lost %d) across clean restarts", skipped, info.Lost)
	}
	// A new process takes the free ranges first: after draining them the
	// sequence is dense up to high.
	s := newSeqs(t, rdb)
	defer s.Close(ctx)
	for range info.FreeCount {
		v, err := s.Next(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, v)
	}
	slices.Sort(all)
	for i, v := range all {
		if v != int64(i+1) {
			t.Fatalf("value %d at position %d: not dense", v, i)
		}
	}
}

// Fault covered: a process that dies without Close leaves its segments
// as a gap; no other process may be handed its values (crash = gap, never
// reuse).
func TestSequences_CrashLeavesGapNeverReuse(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	ctx := idtest.Context(t, time.Minute)
	a := newSeqs(t, rdb)
	if err := a.Create(ctx, "inv", TagOptions{Step: 100}); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	for range 150 { // into a's second segment, a third fetched ahead
		v, err := a.Next(ctx, "inv")
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, v)
	}
	poll.Until(t, 10*time.Second, "the third segment fetched ahead", func() bool { return a.Stats().SegmentsFetched >= 3 })
	// a "crashes": its buffers are dropped without a give-back.
	a.cancel()
	b := newSeqs(t, rdb)
	defer b.Close(ctx)
	for range 500 {
		v, err := b.Next(ctx, "inv")
		if err != nil {
			t.Fatal(err)
		}
		if v <= 300 {
			t.Fatalf("value %d handed out after a crash of the holder of 1-300", v)
		}
		seen = append(seen, v)
	}
	tk := &taker{got: [][]int64{seen}}
	tk.check(t)
}

func TestSequences_Errors(t *testing.T) {
	_, rdb := redistest.Mini(t) // miniredis answering guard.lua's INFO
	ctx := idtest.Context(t, 10*time.Second)
	s := newSeqs(t, rdb)
	if _, err := s.Next(ctx, "nope"); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := s.Next(ctx, "bad tag"); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("bad tag name: %v", err)
	}
	if err := s.Create(ctx, "small", TagOptions{Start: 5, Max: 7, Step: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "small", TagOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	for _, want := range []int64{5, 6, 7} {
		if v, err := s.Next(ctx, "small"); err != nil || v != want {
			t.Fatalf("got %d, %v; want %d", v, err, want)
		}
	}
	// Fault covered: past its maximum a tag must fail, not wrap.
	if _, err := s.Next(ctx, "small"); !errors.Is(err, ErrMaxReached) {
		t.Fatalf("past the max: %v", err)
	}
	if err := s.Create(ctx, "x", TagOptions{Step: 10, Burst: 5}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("burst below step: %v", err)
	}
	s.Close(ctx)
	if _, err := s.Next(ctx, "small"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Fault covered: Redis restarted from an old snapshot (RDB) while a
// process held and handed out values granted after it: the tag must
// continue above every value handed out before (rate bound), also for the
// process that keeps running (its floor) and a new one.
func TestSequences_RestartFromOldSnapshot(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"save 3600 1"}})
	rdb := srv.Client(t)
	ctx := idtest.Context(t, time.Minute)
	a := newSeqs(t, rdb)
	if err := a.Create(ctx, "snap", TagOptions{Step: 100, Rate: 20_000}); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	take := func(s *Sequences, n int) {
		for range n {
			v, err := s.Next(ctx, "snap")
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, v)
		}
	}
	take(a, 250)
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	take(a, 5000) // granted after the snapshot: lost with the restart
	srv.Kill()
	srv.Restart(t)
	b := newSeqs(t, rdb)
	defer b.Close(ctx)
	take(b, 1000)
	take(a, 1000)
	defer a.Close(ctx)
	tk := &taker{got: [][]int64{seen}}
	tk.check(t)
	info, _ := Info(ctx, rdb, "t", "snap")
	if info.Jumps != 1 {
		t.Fatalf("jumps %d after the restart, want 1", info.Jumps)
	}
	t.Logf("lost to the jump: %d values (rate 20000/s)", info.Lost)
}

// seq.lua and the Go side must agree on the segment TTL: restore waits
// for it in the script, the processes drop or check segments after it.
func TestSegmentTTL_MatchesScript(t *testing.T) {
	m := regexp.MustCompile(`local segmentTTLMs = (\d+)`).FindStringSubmatch(contract.Seq)
	if m == nil {
		t.Fatal("seq.lua has no segmentTTLMs")
	}
	if ms, _ := strconv.Atoi(m[1]); time.Duration(ms)*time.Millisecond != SegmentTTL {
		t.Fatalf("seq.lua segmentTTLMs = %s, SegmentTTL = %v", m[1], SegmentTTL)
	}
}

// Fault covered: Redis lost the tag while a process held a segment it
// then left idle past SegmentTTL: it must not hand out that segment's
// rest (an operator may have restored the tag from records since), and it
// keeps handing out an idle segment when Redis lost nothing.
func TestSequences_IdleSegmentCheckedAfterTTL(t *testing.T) {
	mr, rdb := redistest.Mini(t) // miniredis answering guard.lua's INFO
	ctx := idtest.Context(t, 10*time.Second)
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	mr.SetTime(clock.now)
	if err := redistest.InitRegistry(ctx, rdb, "t", flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	s, err := New(rdb, Options{Namespace: "t", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Create(ctx, "idle", TagOptions{Step: 100}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Next(ctx, "idle"); v != 1 {
		t.Fatalf("first value %d", v)
	}
	clock.advance(SegmentTTL + time.Second)
	mr.SetTime(clock.now)
	if v, err := s.Next(ctx, "idle"); err != nil || v != 2 {
		t.Fatalf("idle segment without a loss: %d, %v; want 2", v, err)
	}
	clock.advance(SegmentTTL + time.Second)
	mr.SetTime(clock.now)
	mr.FlushAll() // Redis lost everything
	v, err := s.Next(ctx, "idle")
	if err == nil {
		t.Fatalf("handed out %d from a segment granted before the loss", v)
	}
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("after the loss: %v, want ErrBlocked", err)
	}
}

// stepClock is a clock.Clock the test moves; timers fire at once.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
	mon time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *stepClock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mon
}
func (c *stepClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(0, f) }
func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.mon = c.now.Add(d), c.mon+d
}

// A namespace flaked init never made: Sequences that never ran under it
// are refused (ErrNoRegistry, naming flaked init) and write nothing, so
// no process but init makes {ns}:meta; once it exists they run, and after
// Redis lost it they restore it (they ran under it).
func TestSequences_NoRegistry_RefusedThenRestores(t *testing.T) {
	_, rdb := redistest.Mini(t) // miniredis answering guard.lua's INFO
	ctx := idtest.Context(t, 10*time.Second)
	s, err := New(rdb, Options{Namespace: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	err = s.Create(ctx, "orders", TagOptions{})
	if !errors.Is(err, ErrNoRegistry) || !strings.Contains(err.Error(), "flaked init") {
		t.Fatalf("create on an empty namespace: %v, want ErrNoRegistry naming flaked init", err)
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("a refused call left keys: %v", keys)
	}
	if err := redistest.InitRegistry(ctx, rdb, "t", flake.DefaultLayout().String()); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "orders", TagOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The tag is gone with everything: it was never handed out, so it is
	// unknown, but the call restored the registry.
	if _, err := s.Next(ctx, "orders"); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("next after FLUSHALL: %v, want ErrUnknownTag (the registry restored)", err)
	}
	if rdb.Exists(ctx, contract.NewKeys("t").Meta).Val() != 1 {
		t.Fatal("{t}:meta not restored by Sequences that ran under it")
	}
}

// Fault covered: a tag's hash evicted or deleted, and {ns}:seqs with it,
// while nothing else was lost. The tag stays refused and listed as
// missing since it was first found so (the operator's cue, and when a
// restore is accepted); create refuses it, which made anew from its start
// would hand out its values again.
func TestSequences_TagGone_ListedMissingAndNotCreatedAnew(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	ctx := idtest.Context(t, 10*time.Second)
	now := time.Unix(1_800_000_000, 0)
	mr.SetTime(now)
	s := newSeqs(t, rdb)
	defer s.Close(ctx)
	if err := s.Create(ctx, "gone", TagOptions{Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	k := contract.NewKeys("t")
	mr.Del(k.Seq("gone"))
	other := newSeqs(t, rdb) // a process without a segment of the tag
	defer other.Close(ctx)
	if _, err := other.Next(ctx, "gone"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("a tag gone: %v, want ErrBlocked", err)
	}
	mr.Del(k.Seqs())
	tags, err := List(ctx, rdb, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || tags[0].Tag != "gone" || !tags[0].Missing || !tags[0].MissingSince.Equal(now) {
		t.Fatalf("List: %+v, want gone missing since %v", tags, now)
	}
	if err := other.Create(ctx, "gone", TagOptions{Step: 10}); !errors.Is(err, ErrBlocked) {
		t.Fatalf("create of a tag gone: %v, want ErrBlocked", err)
	}
	if _, err := other.Restore(ctx, "gone", 10, TagOptions{}); !errors.Is(err, ErrRestoreTooEarly) {
		t.Fatalf("restore at once: %v, want ErrRestoreTooEarly", err)
	}
}
