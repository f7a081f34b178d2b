package segment_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/internal/segment"
)

var (
	errClosed = errors.New("closed")
	errFetch  = errors.New("redis away")
	errFinal  = errors.New("refused")
)

// source stands for Redis and the owner of a Buffer: each fetch that
// succeeds is granted the next n values of one counter (Meta is the
// first), as counter.lua and seq.lua grant them; failing decides which
// fetches fail. overlap makes it a broken Redis that grants the last
// value again, for the check's own test.
type source struct {
	mu      sync.Mutex
	buf     segment.Buffer[int64]
	high    int64 // the next value granted
	size    func() int64
	fetchAt func(n int64) int64
	failing func() error
	overlap bool
	gate    chan struct{} // when set, a fetch waits for it before Redis answers
	closed  bool

	inFlight, maxInFlight atomic.Int32
	fetches, failures     atomic.Int64
	delay                 time.Duration
}

func newSource(size func() int64) *source {
	s := &source{size: size, fetchAt: func(n int64) int64 { return 0 }, failing: func() error { return nil }}
	b := &s.buf
	b.Mu, b.Clock, b.ErrClosed = &s.mu, clock.System(), errClosed
	b.Closed = func() bool { return s.closed }
	b.Begin = func() segment.Fetch[int64] {
		n := s.size() // sized under the lock, as the counter does
		return func() (*segment.Segment[int64], error) { return s.fetch(n) }
	}
	b.Landed = func(seg *segment.Segment[int64], err error) error {
		if s.closed {
			return errClosed
		}
		return err
	}
	b.Final = func(err error) bool { return errors.Is(err, errFinal) }
	b.SetCurrent(segment.New[int64](0, -1))
	return s
}

func (s *source) fetch(n int64) (*segment.Segment[int64], error) {
	in := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxInFlight.Load()
		if in <= m || s.maxInFlight.CompareAndSwap(m, in) {
			break
		}
	}
	s.fetches.Add(1)
	if s.delay > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(s.delay))))
	}
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	err := s.failing()
	first := s.high
	if err == nil {
		if s.overlap && first > 0 {
			first--
		}
		s.high = first + n
	}
	s.mu.Unlock()
	if err != nil {
		s.failures.Add(1)
		return nil, err
	}
	seg := segment.New[int64](n, s.fetchAt(n))
	seg.Meta = first
	return seg, nil
}

// take is what a node's caller does: take from the current segment,
// start the prefetch when its take says so, else wait in Await.
func (s *source) take(ctx context.Context, want int64, try bool) ([]int64, error) {
	for {
		seg := s.buf.Current()
		var i, got int64
		if try {
			// All or nothing first, then by add (as the counter's
			// TryNextIDs and NextIDs): Await is for a spent segment only.
			if j, ok := seg.TryTake(want); ok {
				i, got = j, want
			}
		}
		if got == 0 {
			i, got = seg.Take(want)
		}
		if got > 0 {
			if seg.Triggers(i, got) {
				s.buf.Prefetch(seg)
			}
			out := make([]int64, got)
			for k := range out {
				out[k] = seg.Meta + i + int64(k)
			}
			return out, nil
		}
		if err := s.buf.Await(ctx, seg); err != nil {
			return nil, err
		}
	}
}

// hammer runs takers goroutines taking total values at least (1 to 5 at a
// time, by add or by compare-and-swap) and returns every value handed out,
// how many takes failed, and how many values were not above the value
// their taker had before (each taker's must increase).
func hammer(t *testing.T, s *source, takers, total int) (values []int64, failed, backwards int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		left  atomic.Int64
		fails atomic.Int64
		back  atomic.Int64
		wg    sync.WaitGroup
	)
	left.Store(int64(total))
	for g := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 42))
			last := int64(-1)
			var mine []int64
			for left.Load() > 0 {
				vs, err := s.take(ctx, 1+r.Int64N(5), r.IntN(3) == 0)
				if err != nil {
					if !errors.Is(err, errFetch) {
						t.Errorf("taker %d: %v", g, err)
						return
					}
					fails.Add(1)
					continue
				}
				for _, v := range vs {
					if v <= last {
						back.Add(1)
					}
					last = v
				}
				mine = append(mine, vs...)
				left.Add(-int64(len(vs)))
			}
			mu.Lock()
			values = append(values, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return values, fails.Load(), back.Load()
}

// duplicates lists the values handed out more than once.
func duplicates(values []int64) []int64 {
	seen := make(map[int64]bool, len(values))
	var dup []int64
	for _, v := range values {
		if seen[v] {
			dup = append(dup, v)
		}
		seen[v] = true
	}
	return dup
}

// Fault covered: many callers at once on a buffer refilled all the time
// (segments of 1 to 3 values, the prefetch started at their first take:
// a refill storm), with fetches that take a while and one in three that
// fails (Redis away). No value may be handed out twice, nor two fetches
// run at once, and a failure must reach a waiter as an error, never as a
// value.
func TestBuffer_ConcurrentTakersRefillStormFetchErrors_NoValueTwice(t *testing.T) {
	s := newSource(func() int64 { return 1 + rand.Int64N(3) })
	s.delay = 100 * time.Microsecond
	s.failing = func() error {
		if rand.IntN(3) == 0 {
			return errFetch
		}
		return nil
	}
	values, failed, back := hammer(t, s, 16, 5_000)
	if dup := duplicates(values); len(dup) > 0 || back > 0 {
		t.Fatalf("%d values handed out twice, e.g. %v; %d not increasing", len(dup), dup[:min(5, len(dup))], back)
	}
	if m := s.maxInFlight.Load(); m != 1 {
		t.Errorf("%d fetches ran at once; want 1", m)
	}
	if s.failures.Load() == 0 || failed == 0 {
		t.Errorf("%d fetches failed, %d takes saw it: the test injected no failure that reached a caller", s.failures.Load(), failed)
	}
	t.Logf("%d values, %d fetches (%d failed), %d takes failed", len(values), s.fetches.Load(), s.failures.Load(), failed)
}

// The same with large segments prefetched at half, no failures: the
// steady state, where takers never wait and the next segment is ready.
func TestBuffer_ConcurrentTakersPrefetched_NoValueTwice(t *testing.T) {
	s := newSource(func() int64 { return 64 })
	s.fetchAt = func(n int64) int64 { return n / 2 }
	values, _, back := hammer(t, s, 8, 50_000)
	if dup := duplicates(values); len(dup) > 0 || back > 0 {
		t.Fatalf("%d values handed out twice, e.g. %v; %d not increasing", len(dup), dup[:min(5, len(dup))], back)
	}
	if m := s.maxInFlight.Load(); m != 1 {
		t.Errorf("%d fetches ran at once; want 1", m)
	}
}

// The check itself: a Redis that grants a value twice is caught.
func TestBuffer_CheckFindsAValueGrantedTwice(t *testing.T) {
	s := newSource(func() int64 { return 4 })
	s.overlap = true
	values, _, _ := hammer(t, s, 4, 1_000)
	if len(duplicates(values)) == 0 {
		t.Fatal("values granted twice by the source were not found")
	}
}

// Every fetch failing: each caller gets the error, none waits forever
// and none gets a value. A refusal that waiting does not cure (Final)
// reaches a caller that joined the fetch, too.
func TestBuffer_FetchErrorsReachWaiters(t *testing.T) {
	for _, fail := range []error{errFetch, errFinal} {
		s := newSource(func() int64 { return 8 })
		s.delay = time.Millisecond
		s.failing = func() error { return fail }
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if vs, err := s.take(ctx, 1, false); !errors.Is(err, fail) {
					t.Errorf("%v: taker %d: %v, %v; want the fetch's error", fail, g, vs, err)
				}
			}()
		}
		wg.Wait()
	}
}

// A caller whose context ends while a fetch is in flight gets a
// *WaitError wrapping the context's error; after the owner closes, every
// caller gets ErrClosed and no fetch starts.
func TestBuffer_WaitEndsAndClose(t *testing.T) {
	s := newSource(func() int64 { return 8 })
	release := make(chan struct{})
	s.gate = release
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := s.take(ctx, 1, false)
	var we *segment.WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take with a fetch stuck: %v; want a WaitError of the deadline", err)
	}
	close(release)
	if vs, err := s.take(context.Background(), 2, false); err != nil || len(vs) != 2 || vs[0] != 0 {
		t.Fatalf("take once the fetch is done: %v, %v", vs, err)
	}
	s.mu.Lock()
	s.closed = true
	s.buf.Current().SkipTo(s.buf.Current().N())
	s.mu.Unlock()
	before := s.fetches.Load()
	if vs, err := s.take(context.Background(), 1, false); !errors.Is(err, errClosed) {
		t.Fatalf("take after close: %v, %v; want errClosed", vs, err)
	}
	if s.fetches.Load() != before {
		t.Errorf("a fetch started after close")
	}
}

func TestSegment_TakeTryTakeSeal(t *testing.T) {
	s := segment.New[int64](5, 2)
	if i, got := s.Take(2); i != 0 || got != 2 || s.Triggers(i, got) {
		t.Fatalf("Take(2) = %d, %d", i, got)
	}
	if i, ok := s.TryTake(4); ok {
		t.Fatalf("TryTake(4) of 3 left = %d, true", i)
	}
	if i, ok := s.TryTake(1); !ok || i != 2 || !s.Triggers(i, 1) {
		t.Fatalf("TryTake(1) = %d, %v", i, ok)
	}
	if from := s.Seal(); from != 3 || !s.Spent() || s.Left() != 0 {
		t.Fatalf("Seal = %d, spent %v, left %d", from, s.Spent(), s.Left())
	}
	if _, got := s.Take(1); got != 0 {
		t.Fatalf("Take after Seal got %d", got)
	}
	if g := segment.NewGeneration(strings.NewReader("0123456789abcdef")); g != "30313233343536373839616263646566" {
		t.Fatalf("NewGeneration = %q", g)
	}
}
