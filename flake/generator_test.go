package flake_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newGen(t *testing.T, s flake.Settings) (*flake.Generator, *clocktest.Clock) {
	t.Helper()
	clk, _ := s.Clock.(*clocktest.Clock)
	if clk == nil {
		clk = clocktest.New(t0)
		s.Clock = clk
	}
	g, err := flake.New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, clk
}

func next(t *testing.T, g *flake.Generator) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := g.NextIDContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// drive advances the clock one tick at a time until stop is closed.
func drive(clk *clocktest.Clock, unit time.Duration, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(unit)
				runtime.Gosched() // let workers use the tick
			}
		}
	}()
	return done
}

func TestNextID_Concurrent_NoDuplicatesStrictlyIncreasing(t *testing.T) {
	const workers = 8
	perWorker := 1_000_000
	if testing.Short() {
		perWorker = 100_000
	}
	// 1024 IDs a tick: enough ticks to cross many boundaries and borrow,
	// few enough that the test is about the generator, not the driver.
	g, clk := newGen(t, flake.Settings{MachineID: 7, BitsSequence: 10, MaxLead: 200 * time.Millisecond})
	stop := make(chan struct{})
	driven := drive(clk, 10*time.Millisecond, stop)
	results := make([][]uint64, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, perWorker)
			for i := range ids {
				id, err := g.NextIDContext(context.Background())
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
			results[w] = ids
		}()
	}
	wg.Wait()
	close(stop)
	<-driven
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l := g.Layout()
	var all []uint64
	for _, ids := range results {
		idtest.Increasing(t, l, "", ids)
		all = append(all, ids...)
	}
	idtest.Unique(t, l, all)
	for _, id := range all {
		if m := l.Decompose(id).MachineID; m != 7 {
			t.Fatalf("machine %d in %d", m, id)
		}
	}
	if st := g.Stats(); st.Lead > 200*time.Millisecond {
		t.Fatalf("ran %v ahead of the clock, max lead 200ms", st.Lead)
	}
}

func TestNextID_FollowsClockNotCallCount(t *testing.T) {
	g, clk := newGen(t, flake.Settings{})
	l := g.Layout()
	if got, want := l.Decompose(next(t, g)).Tick, l.Tick(t0); got != want {
		t.Fatalf("first tick %d, want the clock's %d", got, want)
	}
	clk.Advance(time.Second)
	if got, want := l.Decompose(next(t, g)).Tick, l.Tick(t0.Add(time.Second)); got != want {
		t.Fatalf("after 1s, tick %d, want %d", got, want)
	}
}

func TestNextID_WallClockStepsBackwards_IDsKeepIncreasing(t *testing.T) {
	for _, step := range []time.Duration{time.Second, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			g, clk := newGen(t, flake.Settings{})
			l := g.Layout()
			var ids []uint64
			for range 1000 {
				ids = append(ids, next(t, g))
			}
			before := l.Decompose(ids[len(ids)-1]).Tick
			clk.StepWall(-step)
			clk.Advance(20 * time.Millisecond)
			for range 1000 {
				ids = append(ids, next(t, g))
			}
			idtest.Increasing(t, l, "", ids)
			if after := l.Decompose(ids[len(ids)-1]).Tick; after < before+2 {
				t.Fatalf("tick went from %d to %d after a %v wall step back; the monotonic clock moved 2 ticks", before, after, step)
			}
			// A generator started now (a restart) reads the stepped wall clock:
			// with the old one's last tick as its floor it still never repeats.
			last := g.Close()
			g2, _ := newGen(t, flake.Settings{Clock: clk, Floor: last, MaxLead: 2 * step})
			id := next(t, g2)
			if id <= ids[len(ids)-1] || l.Decompose(id).Tick <= last {
				t.Fatalf("restarted generator issued %+v at or below floor %d", l.Decompose(id), last)
			}
		})
	}
}

func TestNextID_SequenceExhausted_BorrowsNextTick(t *testing.T) {
	g, _ := newGen(t, flake.Settings{BitsSequence: 4, MaxLead: 50 * time.Millisecond})
	l := g.Layout()
	var ids []uint64
	for range 16 * 3 {
		ids = append(ids, next(t, g))
	}
	idtest.Increasing(t, l, "", ids)
	first, last := l.Decompose(ids[0]), l.Decompose(ids[len(ids)-1])
	if last.Tick != first.Tick+2 || last.Sequence != 15 {
		t.Fatalf("48 IDs at 16 per tick should span 3 ticks: first %+v, last %+v", first, last)
	}
	if st := g.Stats(); st.Lead != 20*time.Millisecond {
		t.Fatalf("lead %v, want 20ms", st.Lead)
	}
}

func TestNextID_MaxLeadReached_WaitsThenErrorsAtDeadline(t *testing.T) {
	g, clk := newGen(t, flake.Settings{BitsSequence: 2, MaxLead: 20 * time.Millisecond})
	l := g.Layout()
	var ids []uint64
	for range 4 * 3 { // the current tick plus two borrowed ones
		ids = append(ids, next(t, g))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := g.NextIDContext(ctx)
	if !errors.Is(err, flake.ErrMaxLead) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrMaxLead and DeadlineExceeded", err)
	}
	if g.Stats().Waits == 0 {
		t.Fatal("NextID returned without waiting")
	}
	// A waiter is released as soon as the clock moves.
	got := make(chan uint64)
	go func() {
		id, err := g.NextIDContext(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- id
	}()
	for len(got) == 0 && g.Stats().Waits < 2 {
		time.Sleep(time.Millisecond)
	}
	clk.Advance(10 * time.Millisecond)
	id := <-got
	idtest.Increasing(t, l, "", append(ids, id))
}

func TestNextID_FloorAboveNow_StartsAfterFloor(t *testing.T) {
	l := flake.DefaultLayout()
	floor := l.Tick(t0) + 50 // 500ms ahead of the clock, within max lead
	g, clk := newGen(t, flake.Settings{Floor: floor})
	id := next(t, g)
	if got := l.Decompose(id).Tick; got != floor+1 {
		t.Fatalf("first tick %d, want floor+1 = %d", got, floor+1)
	}
	// Beyond max lead, NextID waits for the clock.
	far := l.Tick(t0) + 500 // 5 s ahead, max lead 1 s
	g2, _ := newGen(t, flake.Settings{Clock: clk, MachineID: 1, Floor: far})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g2.NextIDContext(ctx); !errors.Is(err, flake.ErrMaxLead) {
		t.Fatalf("err = %v, want ErrMaxLead", err)
	}
	clk.Advance(4*time.Second + 10*time.Millisecond)
	if got := l.Decompose(next(t, g2)).Tick; got != far+1 {
		t.Fatalf("tick %d, want %d", got, far+1)
	}
}

// reserver is a Reserve hook that records grants and can refuse. With
// clk set it grants at most clk's tick + horizon, as Redis caps a grant at
// its TIME + the fleet's horizon, and counts the requests it granted short.
type reserver struct {
	mu      sync.Mutex
	granted int64
	limit   int64 // grant at most this; -1 for no cap
	fail    error
	calls   int

	clk     *clocktest.Clock
	horizon int64
	short   int
}

func (r *reserver) reserve(_ context.Context, upTo int64) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		return 0, r.fail
	}
	if r.limit >= 0 {
		upTo = min(upTo, r.limit)
	}
	if r.clk != nil {
		if most := flake.DefaultLayout().Tick(r.clk.Now()) + r.horizon; upTo > most {
			r.short++
			upTo = most
		}
	}
	r.granted = max(r.granted, upTo)
	return r.granted, nil
}

func (r *reserver) get() (granted int64, calls int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.granted, r.calls
}

// shortGrants is how many requests a capped reserver granted short.
func (r *reserver) shortGrants() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.short
}

func TestNextID_Reserve_CalledBeforeEnteringTicks(t *testing.T) {
	r := &reserver{limit: -1}
	g, clk := newGen(t, flake.Settings{Reserve: r.reserve, ReserveAhead: time.Second})
	l := g.Layout()
	var ids []uint64
	for i := range 5000 {
		if i%50 == 0 {
			clk.Advance(37 * time.Millisecond)
		}
		id := next(t, g)
		ids = append(ids, id)
		if granted, _ := r.get(); l.Decompose(id).Tick > granted {
			t.Fatalf("issued tick %d above grant %d", l.Decompose(id).Tick, granted)
		}
	}
	idtest.Increasing(t, l, "", ids)
	// 3.7 s of clock with 1 s grants, renewed at half: a handful of calls, not one per tick.
	if _, calls := r.get(); calls < 3 || calls > 12 {
		t.Fatalf("Reserve called %d times over 3.7 s with 1 s grants", calls)
	}
}

func TestNextID_ReserveRefused_ErrorsNeverPastGrant(t *testing.T) {
	l := flake.DefaultLayout()
	now := l.Tick(t0)
	r := &reserver{limit: now + 3}
	g, clk := newGen(t, flake.Settings{BitsSequence: 0, Reserve: r.reserve, MaxLead: time.Second})
	var ids []uint64
	for {
		id, err := g.NextID()
		if err != nil {
			if !errors.Is(err, flake.ErrReserve) {
				t.Fatalf("err = %v, want ErrReserve", err)
			}
			break
		}
		ids = append(ids, id)
		if len(ids) > 256*10 {
			t.Fatal("issued far past a grant of 4 ticks")
		}
	}
	if got := len(ids); got != 256*4 {
		t.Fatalf("issued %d IDs, want exactly the 4 granted ticks x 256", got)
	}
	for _, id := range ids {
		if tick := l.Decompose(id).Tick; tick > now+3 {
			t.Fatalf("tick %d past grant %d", tick, now+3)
		}
	}
	// A failing hook: same, and the error says why.
	r.mu.Lock()
	r.fail = errors.New("redis down")
	r.mu.Unlock()
	clk.Advance(100 * time.Millisecond)
	if _, err := g.NextID(); !errors.Is(err, flake.ErrReserve) || !strings.Contains(err.Error(), "redis down") {
		t.Fatalf("err = %v, want ErrReserve naming the cause", err)
	}
	if st := g.Stats(); st.LastError == nil || st.ReserveErrors == 0 {
		t.Fatalf("stats do not show the failure: %+v", st)
	}
	// Recovery: the hook grants again, NextID goes on above everything.
	r.mu.Lock()
	r.fail, r.limit = nil, -1
	r.mu.Unlock()
	id := next(t, g)
	idtest.Increasing(t, l, "", append(ids, id))
}

func TestNextID_MultipleMachineIDs_InterleaveAscending(t *testing.T) {
	g, clk := newGen(t, flake.Settings{MachineIDs: []int{9, 3, 5}, BitsSequence: 4})
	l := g.Layout()
	var ids []uint64
	for i := range 3 * 16 * 5 {
		if i%100 == 0 {
			clk.Advance(10 * time.Millisecond)
		}
		ids = append(ids, next(t, g))
	}
	idtest.Increasing(t, l, "", ids)
	idtest.Unique(t, l, ids)
	p0, p1, p2, p3 := l.Decompose(ids[0]), l.Decompose(ids[1]), l.Decompose(ids[2]), l.Decompose(ids[3])
	if p0.MachineID != 3 || p1.MachineID != 5 || p2.MachineID != 9 || p3.MachineID != 3 ||
		p0.Sequence != p2.Sequence || p3.Sequence != p0.Sequence+1 {
		t.Fatalf("not interleaved per (tick, sequence): %+v %+v %+v %+v", p0, p1, p2, p3)
	}
	if got := g.MachineIDs(); !slices.Equal(got, []int{3, 5, 9}) {
		t.Fatalf("MachineIDs() = %v", got)
	}
}

func TestNextIDs_Batch_MatchesSingleIssue(t *testing.T) {
	for _, mids := range [][]int{{4}, {1, 2, 8}} {
		t.Run(fmt.Sprint(mids), func(t *testing.T) {
			g, clk := newGen(t, flake.Settings{MachineIDs: mids, BitsSequence: 6})
			l := g.Layout()
			var ids []uint64
			buf := make([]uint64, 100)
			for i := range 200 {
				if i%2 == 0 {
					clk.Advance(40 * time.Millisecond)
				}
				n, err := g.NextIDs(context.Background(), buf)
				if err != nil || n != len(buf) {
					t.Fatalf("NextIDs = %d, %v", n, err)
				}
				ids = append(ids, buf...)
				ids = append(ids, next(t, g))
			}
			idtest.Increasing(t, l, "", ids)
		})
	}
}

func TestClose_StopsIssuing_LastTickBoundsEveryID(t *testing.T) {
	for range 20 {
		g, clk := newGen(t, flake.Settings{BitsSequence: 3})
		l := g.Layout()
		var (
			mu     sync.Mutex
			maxT   int64
			issued atomic.Int64
			wg     sync.WaitGroup
		)
		stop := make(chan struct{})
		driven := drive(clk, 10*time.Millisecond, stop)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					id, err := g.NextID()
					if err != nil {
						if !errors.Is(err, flake.ErrClosed) {
							t.Error(err)
						}
						return
					}
					issued.Add(1)
					mu.Lock()
					maxT = max(maxT, l.Decompose(id).Tick)
					mu.Unlock()
				}
			}()
		}
		for issued.Load() < 500 {
			time.Sleep(100 * time.Microsecond)
		}
		if g.Closed() {
			t.Fatal("Closed() is true before Close")
		}
		last := g.Close()
		wg.Wait()
		close(stop)
		<-driven
		if maxT > last {
			t.Fatalf("an ID with tick %d was issued, Close reported last tick %d", maxT, last)
		}
		if _, err := g.NextID(); !errors.Is(err, flake.ErrClosed) {
			t.Fatalf("NextID after Close: %v", err)
		}
		if !g.Closed() {
			t.Fatal("Closed() is false after Close")
		}
		// A second Close may read lower (an add taken back after the
		// first read), never higher: the first already bounded every ID.
		if again := g.Close(); again > last || again < maxT {
			t.Fatalf("a second Close reported last tick %d, the first %d, highest issued %d", again, last, maxT)
		}
	}
}

func TestNew_InvalidSettings(t *testing.T) {
	clk := clocktest.New(t0)
	for _, tc := range []struct {
		name string
		s    flake.Settings
		want error
	}{
		{"counter machine ID", flake.Settings{MachineID: 65535}, flake.ErrInvalidMachineID},
		{"negative machine ID", flake.Settings{MachineID: -1}, flake.ErrInvalidMachineID},
		{"repeated machine IDs", flake.Settings{MachineIDs: []int{1, 2, 1}}, flake.ErrInvalidMachineID},
		{"bad layout", flake.Settings{BitsSequence: 40}, flake.ErrInvalidBitsSequence},
		{"negative lead", flake.Settings{MaxLead: -time.Second}, flake.ErrInvalidLead},
		{"epoch in the future", flake.Settings{StartTime: t0.Add(time.Hour)}, flake.ErrStartTimeAhead},
		{"floor below -1", flake.Settings{Floor: -2}, flake.ErrInvalidFloor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Clock = clk
			if _, err := flake.New(tc.s); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNextID_ZeroAllocations(t *testing.T) {
	g, _ := newGen(t, flake.Settings{BitsSequence: 20, BitsMachineID: 8})
	if n := testing.AllocsPerRun(10000, func() { _, _ = g.NextID() }); n != 0 {
		t.Fatalf("NextID allocates %v times per call", n)
	}
}

func TestNextID_OverTimeLimit(t *testing.T) {
	// 32 time bits of 1 ms last ~49.7 days: start 50 days after the epoch.
	start := t0.Add(-50 * 24 * time.Hour)
	clk := clocktest.New(t0)
	g, _ := newGen(t, flake.Settings{BitsSequence: 15, BitsMachineID: 16, TimeUnit: time.Millisecond, StartTime: start, Clock: clk})
	if _, err := g.NextID(); !errors.Is(err, flake.ErrOverTimeLimit) {
		t.Fatalf("err = %v, want ErrOverTimeLimit", err)
	}
}

// A caller waiting at MaxLead must not burn sequence numbers: every tick
// it waits for yields its whole sequence, 0 included (a failed attempt used
// to take sequence 0 of the next tick with it). The same for NextIDs.
func TestNextID_WaitingAtMaxLead_BurnsNoSequence(t *testing.T) {
	for _, batch := range []int{1, 3} {
		g, clk := newGen(t, flake.Settings{BitsSequence: 2, MaxLead: time.Nanosecond})
		l := g.Layout()
		done, cancel := context.WithCancel(context.Background())
		cancel() // never wait: fail at once when the tick is spent
		var ids []uint64
		for tick := range 20 {
			got := 0
			buf := make([]uint64, batch)
			for {
				n, err := g.NextIDs(done, buf)
				ids = append(ids, buf[:n]...)
				got += n
				if err != nil {
					if !errors.Is(err, flake.ErrMaxLead) {
						t.Fatal(err)
					}
					break
				}
			}
			if tick > 0 && got != 4 {
				t.Fatalf("batch %d, tick %d: %d IDs issued, want all 4 sequences", batch, tick, got)
			}
			clk.Advance(10 * time.Millisecond)
		}
		idtest.Increasing(t, l, "", ids)
		for i := 4; i < len(ids); i++ {
			if p := l.Decompose(ids[i]); int(p.Sequence) != i%4 {
				t.Fatalf("batch %d: ID %d has sequence %d, want %d", batch, i, p.Sequence, i%4)
			}
		}
	}
}

// TryNextID and TryNextIDs never wait, and what they issue, mixed with
// NextID and NextIDs from other goroutines across many ticks (some idle,
// so batches jump to the current tick), is unique and increasing per
// caller. When they say no, the blocking call goes on from there.
func TestTryNextIDs_MixedWithNextID_NoDuplicates(t *testing.T) {
	for _, mids := range [][]int{{7}, {1, 2, 8}} {
		t.Run(fmt.Sprint(mids), func(t *testing.T) {
			g, clk := newGen(t, flake.Settings{MachineIDs: mids, BitsSequence: 8, MaxLead: 50 * time.Millisecond})
			stop := make(chan struct{})
			driven := drive(clk, 10*time.Millisecond, stop)
			const workers, per = 6, 40_000
			results := make([][]uint64, workers)
			var tries, refused atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids := make([]uint64, 0, per+64)
					buf := make([]uint64, 1+w*7)
					for len(ids) < per {
						switch w % 3 {
						case 0:
							ids = append(ids, next(t, g))
						case 1:
							tries.Add(1)
							if g.TryNextIDs(buf) {
								ids = append(ids, buf...)
								continue
							}
							refused.Add(1)
							n, err := g.NextIDs(context.Background(), buf)
							if err != nil {
								t.Error(err)
								return
							}
							ids = append(ids, buf[:n]...)
						case 2:
							tries.Add(1)
							if id, ok := g.TryNextID(); ok {
								ids = append(ids, id)
								continue
							}
							refused.Add(1)
							ids = append(ids, next(t, g))
						}
					}
					results[w] = ids
				}()
			}
			wg.Wait()
			close(stop)
			<-driven
			l := g.Layout()
			var all []uint64
			for _, ids := range results {
				idtest.Increasing(t, l, "", ids)
				all = append(all, ids...)
			}
			idtest.Unique(t, l, all)
			t.Logf("%d IDs; %d of %d tries refused", len(all), refused.Load(), tries.Load())
		})
	}
}

// After an idle spell a batch starts at the current tick at once (no
// waiting, no per-ID slow path), and a batch beyond max-lead is refused
// without issuing anything.
func TestTryNextIDs_IdleJumpsAndMaxLeadRefuses(t *testing.T) {
	g, clk := newGen(t, flake.Settings{MachineID: 3, BitsSequence: 4, MaxLead: 20 * time.Millisecond})
	l := g.Layout()
	first := next(t, g)
	clk.Advance(time.Second)
	g.Stats() // the generator sees the new time; its state stays in the old tick
	buf := make([]uint64, 10)
	if !g.TryNextIDs(buf) {
		t.Fatal("batch after an idle second refused")
	}
	if d := l.Decompose(buf[0]); d.Tick-l.Decompose(first).Tick < 99 {
		t.Fatalf("batch starts at tick %d, first ID at %d: did not jump", d.Tick, l.Decompose(first).Tick)
	}
	big := make([]uint64, 16*4) // 4 ticks of 16: beyond 2 ticks of lead
	if g.TryNextIDs(big) {
		t.Fatal("a batch beyond max-lead was issued")
	}
	after := next(t, g)
	if after != buf[len(buf)-1]+1<<l.BitsMachineID {
		t.Fatalf("ID after a refused batch: %+v, want the one right after %+v", l.Decompose(after), l.Decompose(buf[len(buf)-1]))
	}
}
