package flake_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

// slowStore is a Reserve hook answering after delay (or when gate is
// closed, if set), granting what was asked; it records every request.
type slowStore struct {
	delay time.Duration
	gate  chan struct{}
	l     flake.Layout

	mu      sync.Mutex
	granted int64
	reach   []int64 // upTo - the clock's tick, per call
	calls   int
}

func (s *slowStore) reserve(ctx context.Context, upTo int64) (int64, error) {
	s.mu.Lock()
	s.calls++
	s.reach = append(s.reach, upTo-s.l.Tick(time.Now()))
	s.mu.Unlock()
	if s.gate != nil {
		<-s.gate
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The grant counts from here: everything up to it is issued only
	// after this returns.
	s.granted = max(s.granted, upTo)
	return s.granted, nil
}

func (s *slowStore) grant() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted
}

// Fault: the store does not answer while a caller needs a tick above the
// grant (Redis paused or slow). The caller's wait ends with its context,
// not with the store's reply; the reply, when it comes, serves the next
// caller, and nothing is issued above it.
func TestReserve_StoreNotAnswering_CallerBoundedByContext(t *testing.T) {
	l := flake.DefaultLayout()
	now := l.Tick(time.Now())
	s := &slowStore{gate: make(chan struct{}), l: l}
	g, err := flake.New(flake.Settings{Floor: now - 1, Reserved: now - 1, Reserve: s.reserve,
		ReserveAhead: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = g.NextIDContext(ctx)
	cancel()
	// The gate is still shut: returning at all proves the caller did not
	// wait for the store.
	if !errors.Is(err, flake.ErrReserve) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrReserve and DeadlineExceeded", err)
	}
	close(s.gate)
	id, err := g.NextIDContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tick := l.Decompose(id).Tick; tick > s.grant() || tick < now {
		t.Fatalf("tick %d outside the grant ..%d (floor %d)", tick, s.grant(), now-1)
	}
}

// Fault: every renewal takes longer than what is left of the grant (a
// slow Redis). The generator renews earlier and asks further while round
// trips are long, keeps issuing under the grant while a renewal is in
// flight, and never issues a tick above what was granted, nor an ID twice
// (a renewal in flight while the reservation runs out).
func TestReserve_SlowRenewals_NeverPastGrant(t *testing.T) {
	l := flake.DefaultLayout()
	ahead, lead := 50*time.Millisecond, 100*time.Millisecond
	s := &slowStore{delay: 60 * time.Millisecond, l: l}
	g, err := flake.New(flake.Settings{Floor: l.Tick(time.Now()), Reserve: s.reserve, ReserveAhead: ahead, MaxLead: lead})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	stop := time.Now().Add(600 * time.Millisecond)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				id, err := g.NextIDContext(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, flake.ErrReserve) && !errors.Is(err, flake.ErrMaxLead) {
						t.Error(err)
						return
					}
					continue
				}
				// Read after the ID: the grant only grows, so an ID
				// above it now was issued above every grant so far.
				if tick := l.Decompose(id).Tick; tick > s.grant() {
					t.Errorf("ID %d at tick %d above the grant %d", id, tick, s.grant())
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %d issued twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) == 0 {
		t.Fatal("no ID issued")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	aheadTicks, leadTicks := int64(ahead/l.TimeUnit), int64(lead/l.TimeUnit)
	further := false
	for _, r := range s.reach {
		// One tick of slack: the hook reads the clock after the
		// generator did.
		if r > aheadTicks+leadTicks+1 {
			t.Errorf("a reservation reached %d ticks ahead of the clock, more than reserve ahead + max lead = %d", r, aheadTicks+leadTicks)
		}
		further = further || r > aheadTicks+1
	}
	if !further {
		t.Errorf("no reservation reached past reserve ahead (%d ticks) with round trips of %v: %v", aheadTicks, s.delay, s.reach)
	}
}
