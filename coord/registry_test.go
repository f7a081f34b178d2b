package coord_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/statefile"
)

// ctxT bounds a test's calls to Redis: 30 s.
func ctxT(t *testing.T) context.Context { return idtest.Context(t, 30*time.Second) }

// realRedis starts a redis-server for the test.
func realRedis(t *testing.T) (*redistest.Server, redis.UniversalClient) {
	t.Helper()
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	return srv, srv.Client(t)
}

func miniRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	_, rdb := redistest.Mini(t)
	return rdb
}

// backends runs f on a real redis-server and on miniredis.
func backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("redis-server", func(t *testing.T) {
		_, rdb := realRedis(t)
		f(t, rdb)
	})
	t.Run("miniredis", func(t *testing.T) { f(t, miniRedis(t)) })
}

func newReg(t *testing.T, rdb redis.UniversalClient, o coord.Options) *coord.Registry {
	t.Helper()
	ns := cmp.Or(o.Namespace, coord.DefaultNamespace)
	if o.Horizon == 0 {
		// Most tests are not about data loss: the registry looks as if this
		// server had always held it, so claims do not wait for a loss floor,
		// and the horizon (the reach of any reservation) is the default.
		o.Horizon = coord.DefaultHorizon
		if err := redistest.InitRegistry(context.Background(), rdb, ns, fleetLayout(o).String()); err != nil {
			t.Fatal(err)
		}
	} else if _, _, err := coord.MakeRegistry(context.Background(), rdb, o); err != nil && !errors.Is(err, coord.ErrRegistryExists) {
		// flaked init's registry, without init's wait for Redis to grant past its loss floor.
		t.Fatal(err)
	}
	r, err := coord.NewRegistry(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tinyLayout has one leasable machine ID (0; 1 is the counter's), so a
// second claimer must take over the first one's ID.
func tinyLayout(t *testing.T) flake.Layout {
	l, err := flake.NewLayout(8, 1, 10*time.Millisecond, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestClaim_Concurrent_DistinctIDs(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		const claimers = 200
		reg := newReg(t, rdb, coord.Options{})
		ids := make([]int, claimers)
		var wg sync.WaitGroup
		errs := make(chan error, claimers)
		for i := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = l.MachineIDs()[0]
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		slices.Sort(ids)
		if n := len(slices.Compact(ids)); n != claimers {
			t.Fatalf("%d claimers got %d distinct machine IDs", claimers, n)
		}
		if n, _ := rdb.SCard(ctxT(t), "{flaked}:machines").Result(); n != claimers {
			t.Fatalf("registry set has %d members, want %d", n, claimers)
		}
	})
}

func TestClaim_MultipleIDs_Distinct(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l, err := flake.NewLayout(8, 3, 0, time.Time{}) // IDs 0..6 leasable
		if err != nil {
			t.Fatal(err)
		}
		reg := newReg(t, rdb, coord.Options{Layout: l})
		a, err := reg.Claim(ctxT(t), coord.ClaimOptions{Count: 4})
		if err != nil {
			t.Fatal(err)
		}
		b, err := reg.Claim(ctxT(t), coord.ClaimOptions{Count: 3})
		if err != nil {
			t.Fatal(err)
		}
		all := append(a.MachineIDs(), b.MachineIDs()...)
		slices.Sort(all)
		if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6}) {
			t.Fatalf("7 leases over IDs 0..6 got %v", all)
		}
		if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNoMachineID) {
			t.Fatalf("claim in a full space: %v, want ErrNoMachineID", err)
		}
	})
}

// expire makes a lease lapse now, as if its owner had stopped renewing a
// TTL ago. redis-server expires it for real; miniredis does not expire
// keys by wall time, so there the key is deleted.
func expire(t *testing.T, rdb redis.UniversalClient, ns string, id int) {
	t.Helper()
	key := "{" + ns + "}:lease:" + strconv.Itoa(id)
	if err := rdb.PExpire(ctxT(t), key, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if rdb.Exists(ctxT(t), key).Val() == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	if rdb.Do(ctxT(t), "DEBUG", "SLEEP", "0").Err() == nil {
		t.Fatal("redis-server did not expire the lease")
	}
	rdb.Del(ctxT(t), key) // miniredis
}

// pausable wraps a Reserve hook the way SIGSTOP pauses a process: while
// paused, no call is in flight and none gets through.
type pausable struct {
	mu     sync.Mutex
	paused bool
	hook   func(context.Context, int64) (int64, error)
}

func (p *pausable) reserve(ctx context.Context, upTo int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return 0, errors.New("paused")
	}
	return p.hook(ctx, upTo)
}

func (p *pausable) set(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.mu.Unlock()
}

func TestClaim_KilledOwner_TakenOverAfterExpiry_StartsAfterReservation(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		regA := newReg(t, rdb, coord.Options{Layout: l, Owner: coord.Owner{Host: "a"}})
		regB := newReg(t, rdb, coord.Options{Layout: l, Owner: coord.Owner{Host: "b"}})
		a, err := regA.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := l.Tick(time.Now())
		reserved, err := a.Reserve(ctxT(t), now+50) // 500 ms ahead
		if err != nil || reserved != now+50 {
			t.Fatalf("Reserve = %d, %v", reserved, err)
		}
		// While A's lease lives, B gets nothing.
		if _, err := regB.Claim(ctxT(t), coord.ClaimOptions{}); !errors.Is(err, coord.ErrNoMachineID) {
			t.Fatalf("claim of a live lease: %v, want ErrNoMachineID", err)
		}
		// A is killed: no release, the lease expires.
		expire(t, rdb, "flaked", 0)
		b, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.MachineIDs()[0] != 0 || b.Floor() < reserved {
			t.Fatalf("B took %v with floor %d; A had reserved up to %d", b.MachineIDs(), b.Floor(), reserved)
		}
		if ev := b.ClaimEvents(); ev[0] != "takeover" {
			t.Fatalf("claim event %v, want takeover", ev)
		}
		// A comes back: its renewal must fail, it may not raise anything.
		if _, err := a.Reserve(ctxT(t), now+100); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("A's Reserve after takeover: %v, want ErrLeaseLost", err)
		}
		select {
		case <-a.Done():
		default:
			t.Fatal("A's lease not marked lost")
		}
		if ok, _ := a.Check(ctxT(t)); ok {
			t.Fatal("check.lua says A still holds the lease")
		}
		if ok, _ := b.Check(ctxT(t)); !ok {
			t.Fatal("check.lua says B does not hold the lease")
		}
	})
}

// TestPausedOwner_IssuesNothingPastReservation runs two real generators on
// one machine ID: A is paused past its lease, B takes the ID over, A
// resumes. Every ID of both must be distinct.
func TestPausedOwner_IssuesNothingPastReservation(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		start := time.Now()
		gen := func(reg *coord.Registry, clk *clocktest.Clock) (*coord.Lease, *pausable, *flake.Generator) {
			lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p := &pausable{hook: lease.Reserve}
			g, err := flake.New(flake.Settings{
				BitsSequence: l.BitsSequence, BitsMachineID: l.BitsMachineID,
				MachineIDs: lease.MachineIDs(), Floor: lease.Floor(), Reserved: lease.Granted(),
				Reserve: p.reserve, ReserveAhead: 200 * time.Millisecond, MaxLead: 100 * time.Millisecond, Clock: clk,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			return lease, p, g
		}
		issue := func(g *flake.Generator, clk *clocktest.Clock, n int, ids []uint64) []uint64 {
			for i := range n {
				if i%100 == 0 {
					clk.Advance(30 * time.Millisecond)
				}
				for {
					// A new owner may start ahead of its clock: drive the
					// clock while the generator waits for it.
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					id, err := g.NextIDContext(ctx)
					cancel()
					if errors.Is(err, flake.ErrMaxLead) {
						// 100 ms a step: B's clock starts seconds behind
						// its floor, and each step costs a 20 ms timeout.
						clk.Advance(100 * time.Millisecond)
						continue
					}
					if errors.Is(err, flake.ErrReserve) && time.Since(start) < time.Minute {
						// No reservation reaches further than a horizon past
						// Redis TIME (renew.lua), and B starts above A's,
						// which may be that far ahead: B waits for Redis's
						// real clock, as a node would.
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if err != nil {
						t.Fatalf("%v (clock tick %d, Redis tick %d, %d IDs so far)", err, l.Tick(clk.Now()), redisNowTick(t, rdb, l), len(ids))
					}
					ids = append(ids, id)
					break
				}
			}
			return ids
		}
		// A registry made by Init (with its loss floor) and a
		// horizon of 1 s instead of 5 (B's wait for Redis's clock is bounded
		// by it): what the test is about, A stopping at its grant, depends
		// on neither.
		o := coord.Options{Layout: l, MaxWait: time.Minute, Horizon: time.Second}
		if _, err := coord.Init(ctxT(t), rdb, o); err != nil {
			t.Fatal(err)
		}
		regA, regB := newReg(t, rdb, o), newReg(t, rdb, o)
		clkA, clkB := clocktest.New(start), clocktest.New(start)
		leaseA, pauseA, genA := gen(regA, clkA)
		ids := issue(genA, clkA, 2000, nil)
		// A is stopped; its lease expires; B takes over and issues.
		pauseA.set(true)
		grantA := leaseA.Granted()
		expire(t, rdb, "flaked", 0)
		clkB.Advance(clkA.Monotonic()) // B's clock reads what A's did
		leaseB, _, genB := gen(regB, clkB)
		// B waits for Redis's clock to pass its floor: it keeps its lease
		// alive meanwhile, as a node does (an expired lease is lost, never
		// re-asserted).
		leaseB.KeepAlive()
		if leaseB.Floor() < grantA {
			t.Fatalf("B starts after %d, below A's reservation %d", leaseB.Floor(), grantA)
		}
		ids = issue(genB, clkB, 2000, ids)
		// A resumes and issues as much as it can: it must stop at its grant.
		pauseA.set(false)
		var fromA int
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			id, err := genA.NextIDContext(ctx)
			cancel()
			if errors.Is(err, flake.ErrMaxLead) && fromA <= 100_000 {
				// A runs ahead of its clock (it started at the loss floor
				// init left): its clock moves, and its next renewal, due on
				// a tick, finds the lease gone.
				clkA.Advance(10 * time.Millisecond)
				fromA++
				continue
			}
			if err != nil {
				if !errors.Is(err, flake.ErrReserve) {
					t.Fatalf("A after losing its lease: %v", err)
				}
				break
			}
			if tick := l.Decompose(id).Tick; tick > grantA {
				t.Fatalf("A issued tick %d past its reservation %d", tick, grantA)
			}
			ids = append(ids, id)
			fromA++
			if fromA%50 == 0 {
				clkA.Advance(10 * time.Millisecond)
			}
			if fromA > 100_000 {
				t.Fatal("A keeps issuing after losing its lease")
			}
		}
		if leaseA.Err() == nil {
			t.Fatal("A's lease is not marked lost")
		}
		idtest.Unique(t, l, ids)
	})
}

func TestRestart_ReusesMachineIDFromStateFile(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		path := filepath.Join(t.TempDir(), "node.state")
		reg := newReg(t, rdb, coord.Options{})
		claim := func() (*statefile.File, *coord.Lease) {
			sf, prev, err := statefile.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{State: sf, Previous: prev})
			if err != nil {
				t.Fatal(err)
			}
			return sf, lease
		}
		sf, first := claim()
		now := flake.DefaultLayout().Tick(time.Now())
		if _, err := first.Reserve(ctxT(t), now+100); err != nil {
			t.Fatal(err)
		}
		// Clean stop: release with the exact last tick.
		if err := first.Release(ctxT(t), now+3); err != nil {
			t.Fatal(err)
		}
		sf.Close()
		sf, second := claim()
		if second.MachineIDs()[0] != first.MachineIDs()[0] || second.Floor() != now+3 {
			t.Fatalf("after a clean stop: ID %v floor %d, want %v floor %d",
				second.MachineIDs(), second.Floor(), first.MachineIDs(), now+3)
		}
		// Crash: no release. The restart finds the lease still ours.
		if _, err := second.Reserve(ctxT(t), now+200); err != nil {
			t.Fatal(err)
		}
		sf.Close()
		_, third := claim()
		if third.MachineIDs()[0] != first.MachineIDs()[0] || third.Floor() != now+200 {
			t.Fatalf("after a crash: ID %v floor %d, want %v floor %d", third.MachineIDs(), third.Floor(), first.MachineIDs(), now+200)
		}
		if ev := third.ClaimEvents(); ev[0] != "reclaim" {
			t.Fatalf("event %v, want reclaim", ev)
		}
	})
}

func TestRedisFlushed_MidRun_NoDuplicate(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := tinyLayout(t)
		horizon := 3 * time.Second
		regA := newReg(t, rdb, coord.Options{Layout: l, Horizon: horizon, MaxWait: time.Minute})
		regB := newReg(t, rdb, coord.Options{Layout: l, Horizon: horizon, MaxWait: time.Minute})
		// B ran under the registry before, so it restores it after the
		// loss (a node that never did is refused: ErrNoRegistry).
		pre, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pre.Release(ctxT(t), pre.Floor()); err != nil {
			t.Fatal(err)
		}
		a, err := regA.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := l.Tick(time.Now())
		grantA, err := a.Reserve(ctxT(t), now+200) // 2 s ahead, inside the horizon
		if err != nil {
			t.Fatal(err)
		}
		rdb.FlushAll(ctxT(t))
		// B arrives first after the loss: it may take ID 0, but only after
		// anything A could have reserved.
		b, err := regB.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Floor() < grantA {
			t.Fatalf("after FLUSHALL, B starts after %d; A had reserved %d", b.Floor(), grantA)
		}
		if _, err := a.Reserve(ctxT(t), now+300); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("A after B took its ID: %v, want ErrLeaseLost", err)
		}
		// The other order: the live owner renews before anyone claims. It
		// cannot re-assert (a claim lost with the data may have been
		// another owner's), so it loses the lease; but it restores the
		// fleet's layout and {ns}:meta, and the next claim starts after
		// everything it had reserved.
		grantB, err := b.Reserve(ctxT(t), l.Tick(time.Now())+200)
		if err != nil {
			t.Fatal(err)
		}
		rdb.FlushAll(ctxT(t))
		if err := b.Renew(ctxT(t)); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("renewal after FLUSHALL: %v, want ErrLeaseLost", err)
		}
		if got, _ := rdb.Get(ctxT(t), "{flaked}:layout").Result(); got != l.String() {
			t.Fatalf("layout after the renewal = %q, want %q restored", got, l.String())
		}
		if got, _ := rdb.HGet(ctxT(t), "{flaked}:meta", "generation").Result(); got != b.Generation() {
			t.Fatalf("meta generation after the renewal = %q, want B's %q restored", got, b.Generation())
		}
		if !hasEvent(t, rdb, "dataloss") || !hasEvent(t, rdb, "layout_restored") {
			t.Fatal("no dataloss or layout_restored event")
		}
		c, err := regA.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Floor() < grantB {
			t.Fatalf("claim after the loss starts after %d; B had reserved %d", c.Floor(), grantB)
		}
	})
}

func TestLayoutMismatch_Refused_NamesBoth(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		if _, err := newReg(t, rdb, coord.Options{}).Claim(ctxT(t), coord.ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
		other, _ := flake.NewLayout(10, 14, 0, time.Time{})
		_, err := newReg(t, rdb, coord.Options{Layout: other}).Claim(ctxT(t), coord.ClaimOptions{})
		if !errors.Is(err, coord.ErrLayoutMismatch) ||
			!strings.Contains(err.Error(), flake.DefaultLayout().String()) || !strings.Contains(err.Error(), other.String()) {
			t.Fatalf("err = %v, want ErrLayoutMismatch naming both layouts", err)
		}
		if !hasEvent(t, rdb, "layout_mismatch") {
			t.Fatal("no layout_mismatch event")
		}
	})
}

func hasEvent(t *testing.T, rdb redis.UniversalClient, kind string) bool {
	msgs, err := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Values["type"] == kind {
			return true
		}
	}
	return false
}

func TestClockGuard_RefusesSkew(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		reg := newReg(t, rdb, coord.Options{MaxSkew: 500 * time.Millisecond,
			Clock: clock.NewOffset(3 * time.Second)})
		_, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if !errors.Is(err, coord.ErrClockSkew) || !strings.Contains(err.Error(), "max skew 500ms") {
			t.Fatalf("err = %v, want ErrClockSkew naming the limit", err)
		}
		if !hasEvent(t, rdb, "clock_skew") {
			t.Fatal("no clock_skew event")
		}
	})
}

// A state file of another namespace or layout: the claim refuses it
// (statefile.ErrMismatch) rather than reuse machine IDs of another fleet.
func TestClaim_StateFileOfAnotherFleet_Refused(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.state")
	sf, _, err := statefile.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	st := statefile.State{Namespace: "flaked", Layout: flake.DefaultLayout().String(), MachineIDs: []int{3}, Reservation: 42, Token: "t"}
	if err := sf.Save(st); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	rdb := miniRedis(t)
	for _, o := range []coord.Options{{Namespace: "other"}, {Layout: tinyLayout(t)}} {
		sf, prev, err := statefile.Open(good)
		if err != nil {
			t.Fatal(err)
		}
		_, err = newReg(t, rdb, o).Claim(ctxT(t), coord.ClaimOptions{State: sf, Previous: prev})
		sf.Close()
		if !errors.Is(err, statefile.ErrMismatch) {
			t.Fatalf("options %+v: err = %v, want ErrMismatch", o, err)
		}
	}
}

func TestOptions_Invalid_NameRange(t *testing.T) {
	for _, o := range []coord.Options{
		{Namespace: "has space"}, {LeaseTTL: time.Millisecond}, {MaxSkew: 2 * time.Hour}, {Horizon: -1}, {EventsMaxLen: 5},
	} {
		if _, err := coord.NewRegistry(nil, o); !errors.Is(err, coord.ErrInvalidOptions) || !strings.Contains(err.Error(), "valid") && !strings.Contains(err.Error(), "want") && !strings.Contains(err.Error(), ">=") {
			t.Errorf("%+v: err = %v", o, err)
		}
	}
}

// Owner data deleted under a live lease is written back whole at the next
// renewal, never as a partial hash (audit would report it as incomplete).
func TestRenew_OwnerHashGone_WrittenWhole(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		reg := newReg(t, rdb, coord.Options{Owner: coord.Owner{Host: "h", PID: 42, Addr: "a:1", Version: "v9"}})
		lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(context.Background(), lease.Floor())
		key := fmt.Sprintf("{flaked}:owner:%d", lease.MachineIDs()[0])
		if err := rdb.Del(ctxT(t), key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := lease.Renew(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		h, err := rdb.HGetAll(ctxT(t), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{"host": "h", "pid": "42", "addr": "a:1", "version": "v9", "token": lease.Token(), "state": "live"} {
			if h[k] != want {
				t.Fatalf("owner hash after renewal: %s = %q, want %q (hash %v)", k, h[k], want, h)
			}
		}
		for _, k := range []string{"heartbeat", "mode", "claimed", "first_claim"} {
			if h[k] == "" {
				t.Fatalf("owner hash after renewal lacks %s: %v", k, h)
			}
		}
	})
}

// fleetLayout is the layout a registry of options o runs (the default
// when o sets none).
func fleetLayout(o coord.Options) flake.Layout {
	if o.Layout.BitsTime == 0 {
		return flake.DefaultLayout()
	}
	return o.Layout
}
