package flake_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flaked/flaked/clock/clocktest"
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

// A generator on a machine ID never reserved before (Floor -1, the first
// claim of a fresh ID) asks no further than reserve ahead + max lead: its
// first prefetch read the wrapped state of "nothing issued" as a tick at
// the end of time and asked for everything, which the store capped at its
// clock + the fleet's horizon. A restart after kill -9 then waited for
// that reservation: horizon - max lead (2 s by default).
func TestReserve_FreshMachineID_FirstReservationWithinReach(t *testing.T) {
	l := flake.DefaultLayout()
	ahead, lead := 200*time.Millisecond, 100*time.Millisecond
	s := &slowStore{l: l}
	g, err := flake.New(flake.Settings{Floor: -1, Reserved: -1, Reserve: s.reserve, ReserveAhead: ahead, MaxLead: lead})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for range 3 {
		if _, err := g.NextID(); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reach) == 0 {
		t.Fatal("no reservation asked for")
	}
	for _, r := range s.reach {
		if max := int64((ahead + lead) / l.TimeUnit); r > max+1 { // a tick of slack: the hook reads the clock later
			t.Errorf("a reservation reached %d ticks ahead of the clock, more than reserve ahead + max lead = %d (all: %v)", r, max, s.reach)
		}
	}
}

// Fault: the generator starts with a floor past what the store can grant
// yet (the store grants up to its clock + the fleet's horizon, as
// renew.lua caps a reservation, and a lease claimed after a data loss
// starts at loss + skew + horizon; a takeover starts above the previous
// process's grant). Asking for the tick after the floor at once was
// refused, and NextID failed with ErrReserve until the clock caught up.
// Guard: a tick past max lead is waited for before it is reserved, so the
// caller waits for the clock (ErrMaxLead only when its context ends), not
// for a grant the store cannot make yet. Background renewals the store
// grants short are spaced 100 ms apart (cappedEvery), not made every tick
// (203 calls in these 3 s before); no caller sees them. A duplicate would
// show as an ID at or below the floor, or above the grant.
func TestReserve_FloorPastStoreCap_WaitsForClockNotRefused(t *testing.T) {
	l := flake.DefaultLayout()
	clk := clocktest.New(t0)
	st := &reserver{limit: -1, clk: clk, horizon: 301} // ticks: the store's cap ahead of its clock
	floor := l.Tick(t0) + st.horizon + 100             // loss + 1 s skew + horizon
	st.granted = floor
	g, _ := newGen(t, flake.Settings{Clock: clk, Floor: floor, Reserved: floor, Reserve: st.reserve, MaxLead: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err := g.NextIDContext(ctx)
	cancel()
	if !errors.Is(err, flake.ErrMaxLead) || errors.Is(err, flake.ErrReserve) {
		t.Fatalf("NextID 4 s before the floor: %v; want a wait for the clock (ErrMaxLead at the caller's deadline)", err)
	}
	clk.Advance(time.Duration(floor+1-100-l.Tick(t0)) * l.TimeUnit) // the floor's next tick within max lead
	id := next(t, g)
	granted, _ := st.get()
	short := st.shortGrants()
	if tick := l.Decompose(id).Tick; tick != floor+1 || tick > granted {
		t.Fatalf("first ID at tick %d; want floor+1 = %d, within the grant %d", tick, floor+1, granted)
	}
	if limit := 3020/100 + 2; short > limit {
		t.Fatalf("%d background reservations granted short while the clock caught up 3 s: want at most one per 100 ms (%d)", short, limit)
	}
}

// Fault: as above, but a second later (Redis clocks' skew past the loss),
// when the store's cap covers the floor and the node had Floor+1 granted
// before starting the generator (node.startsNowLocked). The generator
// issues at Floor+1 at once, 3 s ahead of its clock, instead of waiting
// for the clock, and never past what the store granted: a duplicate would
// show as an ID at or below the floor or above the grant, or as IDs not
// strictly increasing.
func TestReserve_FloorAheadGranted_IssuesAtOnceWithinGrant(t *testing.T) {
	l := flake.DefaultLayout()
	clk := clocktest.New(t0)
	st := &reserver{limit: -1, clk: clk, horizon: 301} // ticks: the store's cap ahead of its clock
	floor := l.Tick(t0) + st.horizon - 1               // loss + skew + horizon, a second after the loss
	got, _ := st.reserve(context.Background(), floor+200)
	if got <= floor {
		t.Fatalf("store granted %d, want past the floor %d", got, floor)
	}
	g, _ := newGen(t, flake.Settings{Clock: clk, Floor: floor, Reserved: got, Reserve: st.reserve, MaxLead: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var last uint64
	for i := 0; ; i++ {
		id, ok := g.TryNextID()
		if !ok {
			// The grant (1 tick: the store's cap) is spent: the caller
			// waits, it is not refused, and nothing past it is issued.
			short, c2 := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := g.NextIDContext(short)
			c2()
			if !errors.Is(err, flake.ErrMaxLead) {
				t.Fatalf("NextID past the grant: %v; want a wait for the clock", err)
			}
			if i < 256 {
				t.Fatalf("issued %d IDs at once; want the granted tick's 256", i)
			}
			break
		}
		tick := l.Decompose(id).Tick
		if granted, _ := st.get(); tick <= floor || tick > granted || id <= last {
			t.Fatalf("ID %d at tick %d after %d: want strictly increasing, in floor %d < tick <= grant %d", i, tick, last, floor, granted)
		}
		last = id
	}
	// The store's cap moves with its clock: a background renewal, at most
	// one per 100 ms while the store grants less than asked, fetches the
	// next ticks; the generator stays 3 s ahead.
	clk.Advance(100 * time.Millisecond)
	id, err := g.NextIDContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tick := l.Decompose(id).Tick; tick != floor+2 || id <= last {
		t.Fatalf("next ID at tick %d, want %d", tick, floor+2)
	}
}

// Fault: as above, with the generator started before the store could grant
// past the floor (a node that swaps to its new lease when the one it
// drains is spent). Once a background renewal gets Floor+1 granted (the
// store's cap reaches it a skew after the loss), the generator starts
// there, 3 s ahead of its clock, rather than waiting for the clock to near
// it. A duplicate would show as an ID at or below the floor or above the
// grant.
func TestReserve_FloorGrantedLater_StartsAheadThen(t *testing.T) {
	l := flake.DefaultLayout()
	clk := clocktest.New(t0)
	st := &reserver{limit: -1, clk: clk, horizon: 301}
	floor := l.Tick(t0) + st.horizon + 100 // loss + 1 s skew + horizon
	st.granted = floor
	g, _ := newGen(t, flake.Settings{Clock: clk, Floor: floor, Reserved: floor, Reserve: st.reserve, MaxLead: time.Second})
	// Background renewals, one per 100 ms while the cap holds them short:
	// the cap covers floor+1 from 1 s + a tick on.
	clk.Advance(time.Second + 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	id, err := g.NextIDContext(ctx)
	if err != nil {
		t.Fatalf("NextID with floor+1 granted, 3 s ahead of the clock: %v; want it at once", err)
	}
	if granted, _ := st.get(); l.Decompose(id).Tick != floor+1 || l.Decompose(id).Tick > granted {
		t.Fatalf("first ID at tick %d; want floor+1 = %d, within the grant %d", l.Decompose(id).Tick, floor+1, granted)
	}
}

// Fault: the store goes away (Redis paused, failing over) at the moment a
// renewal is due. A generator issues on under what it holds for all of
// its reach but a second, the renewal interval: the reach an operator sets
// (--reserve-ahead) is the outage a node rides out, where renewing at half
// of it rode out half. Nothing is issued above the grant (a duplicate
// across nodes would need that).
func TestReserve_StoreAway_RiddenOutForReachLessASecond(t *testing.T) {
	const ahead = 10 * time.Second
	r := &reserver{limit: -1}
	g, clk := newGen(t, flake.Settings{Reserve: r.reserve, ReserveAhead: ahead})
	l := g.Layout()
	step := func() (uint64, error) {
		clk.Advance(10 * time.Millisecond) // runs a renewal an ID started
		return g.NextID()
	}
	for range 3000 { // 30 s: steady renewals
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// The store fails from now; the outage counts from its first refused call.
	r.mu.Lock()
	r.fail = errors.New("store away")
	before := r.calls
	r.mu.Unlock()
	var since time.Duration = -1
	for i := 0; ; i++ {
		if i > 3000 {
			t.Fatal("issued for 30 s with the store away, past every grant")
		}
		id, err := step()
		if _, calls := r.get(); calls > before && since < 0 {
			since = 0
		}
		if err != nil {
			if !errors.Is(err, flake.ErrReserve) {
				t.Fatalf("err = %v, want ErrReserve", err)
			}
			break
		}
		if granted, _ := r.get(); l.Decompose(id).Tick > granted {
			t.Fatalf("issued tick %d above the grant %d", l.Decompose(id).Tick, granted)
		}
		if since >= 0 {
			since += 10 * time.Millisecond
		}
	}
	if want := ahead - time.Second - 20*time.Millisecond; since < want {
		t.Fatalf("issued for %v after the first refused renewal, want at least %v (the reach less a second)", since, want)
	}
}

// Fault: the store stops granting (Redis away, or its replicas not
// acknowledging) while a generator that started at a floor 14 s ahead of
// its clock (the loss floor after flaked init or a failover, a takeover
// of a reservation made ahead) serves a load at its sequence limit. The
// store caps every grant at its clock + the horizon, so a generator that
// stayed as far ahead as it started held a tick or two beyond what it
// issued and stopped at once. It gives the start back (runLimit) at half
// the clock's pace, so once the clock gained the start back it holds its
// reach again and issues on for all of it but a second. Every ID checked:
// strictly increasing, above the floor, within the grant (a duplicate
// across nodes would need an ID past the grant or at the floor).
func TestReserve_StartedAheadUnderFullLoad_GivesStartBackAndHoldsReach(t *testing.T) {
	const ahead, lead = 12 * time.Second, time.Second
	l := flake.DefaultLayout()
	clk := clocktest.New(t0)
	st := &reserver{limit: -1, clk: clk, horizon: 1401} // the fleet horizon: lead + reach + skew + a tick
	floor := l.Tick(t0) + st.horizon - 1                // a loss floor, granted past a second after the loss
	got, _ := st.reserve(context.Background(), floor+1)
	g, _ := newGen(t, flake.Settings{Clock: clk, Floor: floor, Reserved: got, Reserve: st.reserve,
		MaxLead: lead, ReserveAhead: ahead})
	var last uint64
	issued := 0
	// step moves the clock a tick and takes every ID the generator hands
	// out at once: a load at its sequence limit.
	step := func() int {
		clk.Advance(l.TimeUnit)
		n := 0
		for {
			id, ok := g.TryNextID()
			if !ok {
				return n
			}
			tick := l.Decompose(id).Tick
			if granted, _ := st.get(); id <= last || tick <= floor || tick > granted {
				t.Fatalf("ID %d at tick %d after %d: want strictly increasing, in floor %d < tick <= grant %d", id, tick, last, floor, granted)
			}
			last = id
			n++
		}
	}
	const catchUpTicks = 2 * 1400 // twice the start
	for range catchUpTicks + 200 {
		issued += step()
	}
	perTick := 1 << l.BitsSequence
	if half := (catchUpTicks + 200) * perTick / 2; issued < half {
		t.Fatalf("issued %d IDs in %d ticks at the sequence limit; want at least half of it (%d) while the start is given back", issued, catchUpTicks+200, half)
	}
	st.mu.Lock()
	st.fail = errors.New("store away")
	st.mu.Unlock()
	for i := 0; ; i++ {
		if step() == 0 {
			if want := int((ahead - time.Second) / l.TimeUnit); i < want {
				t.Fatalf("issued for %d ticks after the store went away; want its reach less a second (%d ticks)", i, want)
			}
			return
		}
		if i > 2000 {
			t.Fatal("issued for 20 s with the store away: past every grant")
		}
	}
}
