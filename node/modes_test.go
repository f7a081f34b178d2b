package node_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/flake/flaketest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// quiet drops go-redis's log lines about failed dials while Redis is
// paused or down on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	m.Run()
}

func realRedis(t *testing.T) *redistest.Server {
	t.Helper()
	redistest.Require(t)
	return redistest.Start(t, redistest.Options{})
}

// client returns a go-redis client with short timeouts, so a paused Redis
// costs a health check little.
func client(t *testing.T, srv *redistest.Server) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func newNode(t *testing.T, o node.Options) *node.Node {
	t.Helper()
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// fast are node options for tests that switch modes: health checked every
// 20 ms, back to flake after 300 ms of health.
func fast(o node.Options) node.Options {
	o.CheckInterval = 20 * time.Millisecond
	o.RetryInterval = 50 * time.Millisecond
	o.RecoverAfter = 300 * time.Millisecond
	return o
}

// findDuplicates fails the test with every duplicate decoded.
func findDuplicates(t *testing.T, l flake.Layout, ids []uint64) {
	t.Helper()
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	var dups []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] && len(dups) < 10 {
			dups = append(dups, fmt.Sprintf("%d %+v", sorted[i], l.Decompose(sorted[i])))
		}
	}
	if len(dups) > 0 {
		t.Fatalf("duplicates among %d IDs: %v", len(ids), dups)
	}
}

func strictlyIncreasing(t *testing.T, l flake.Layout, name string, ids []uint64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("%s: ID %d %+v follows %d %+v: not strictly increasing", name,
				ids[i], l.Decompose(ids[i]), ids[i-1], l.Decompose(ids[i-1]))
		}
	}
}

// A fleet where some nodes are forced into counter mode and others stay in
// flake mode issues 1M IDs on one real redis-server with no duplicate;
// counter IDs carry only the reserved machine ID, flake nodes distinct ones.
func TestFleet_FlakeAndCounterNodes_MillionIDs_NoDuplicate(t *testing.T) {
	srv := realRedis(t)
	type plan struct {
		mode node.Mode
		ids  int
	}
	plans := []plan{
		{node.ModeFlake, 100_000}, {node.ModeFlake, 100_000}, {node.ModeFlake, 100_000}, {node.ModeFlake, 100_000},
		{node.ModeCounter, 300_000}, {node.ModeCounter, 300_000},
	}
	// 12 sequence bits: 409,600 IDs/s per machine ID, and as much for the
	// fleet's one counter (at the default layout counter mode is capped
	// at 25,600 IDs/s fleet-wide, which would make this test slow).
	l, err := flake.NewLayout(12, 10, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*node.Node, len(plans))
	for i, p := range plans {
		nodes[i] = newNode(t, node.Options{Redis: srv.Client(t), Mode: p.mode, MachineIDs: 4,
			Registry: coord.Options{Layout: l}})
	}
	got := make([][]uint64, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, p.ids)
			for off := 0; off < len(ids); off += 500 {
				if _, err := nodes[i].NextIDs(ctxT(t), ids[off:min(off+500, len(ids))]); err != nil {
					t.Error(err)
					return
				}
			}
			got[i] = ids
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	l = nodes[0].Layout()
	var all []uint64
	seen := map[int]int{}
	for i, ids := range got {
		strictlyIncreasing(t, l, fmt.Sprintf("node %d (%s)", i, plans[i].mode), ids)
		for _, id := range ids {
			m := l.Decompose(id).MachineID
			if (m == l.CounterMachineID()) != (plans[i].mode == node.ModeCounter) {
				t.Fatalf("node %d in %s mode issued an ID with machine ID %d", i, plans[i].mode, m)
			}
			if plans[i].mode == node.ModeFlake {
				if o, ok := seen[m]; ok && o != i {
					t.Fatalf("machine ID %d used by nodes %d and %d", m, o, i)
				}
				seen[m] = i
			}
		}
		all = append(all, ids...)
	}
	if len(all) != 1_000_000 || len(seen) != 16 {
		t.Fatalf("%d IDs, %d machine IDs; want 1M and 16", len(all), len(seen))
	}
	findDuplicates(t, l, all)
}

// Counter mode goes on after Redis restarts without persistence (its data
// lost): IDs stay unique and strictly increasing.
func TestCounterMode_RedisRestartWithoutPersistence_NoDuplicate(t *testing.T) {
	srv := realRedis(t)
	n := newNode(t, node.Options{Redis: client(t, srv), Mode: node.ModeCounter})
	var ids []uint64
	take := func(count int) {
		for len(ids) < count {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			id, err := n.NextID(ctx)
			cancel()
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, fallback.ErrUnavailable) {
					t.Fatalf("counter NextID: %v", err)
				}
				continue
			}
			ids = append(ids, id)
		}
	}
	take(30_000)
	for round := range 2 {
		srv.Kill() // no persistence: the counter is gone
		srv.Restart(t)
		if v, err := srv.Client(t).Exists(ctxT(t), "{flaked}:counter").Result(); err != nil || (v != 0 && round == 0) {
			t.Fatalf("counter key after restart: %d, %v; want it lost", v, err)
		}
		take(len(ids) + 30_000)
	}
	l := n.Layout()
	strictlyIncreasing(t, l, "counter node", ids)
	findDuplicates(t, l, ids)
	if n.Mode() != node.ModeCounter {
		t.Fatalf("mode %s", n.Mode())
	}
}

// issuer runs NextID in one goroutine until stopped, recording every ID
// in issue order and the modes seen.
type issuer struct {
	mu    sync.Mutex
	ids   []uint64
	modes []node.Mode
	errs  int
	stop  chan struct{}
	done  chan struct{}
}

func startIssuer(n *node.Node) *issuer {
	is := &issuer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(is.done)
		for {
			select {
			case <-is.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			id, err := n.NextID(ctx)
			cancel()
			is.mu.Lock()
			if err != nil {
				is.errs++
			} else {
				is.ids = append(is.ids, id)
				if m := n.Mode(); len(is.modes) == 0 || is.modes[len(is.modes)-1] != m {
					is.modes = append(is.modes, m)
				}
			}
			is.mu.Unlock()
			if err != nil {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	return is
}

func (is *issuer) count() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return len(is.ids)
}

func (is *issuer) halt() {
	close(is.stop)
	<-is.done
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// modeEvents returns the from->to pairs of the mode events in the stream.
func modeEvents(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	evs, err := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Values["type"] == "mode" {
			out = append(out, fmt.Sprint(e.Values["from"], "->", e.Values["to"]))
		}
	}
	return out
}

// In auto mode, Redis away for longer than the reservation lasts makes
// the node leave flake mode (it never issues past the reservation; while
// Redis is away NextID errors, never guesses); when Redis is back it
// issues from the counter, then returns to flake mode. IDs are strictly
// increasing across every switch, and the switches are audit events.
func TestAuto_RedisAwayLongerThanReservation_FallsBackAndReturns(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	o := fast(node.Options{Redis: rdb, Mode: node.ModeAuto, MaxLead: 50 * time.Millisecond,
		ReserveAhead: 100 * time.Millisecond, Registry: coord.Options{LeaseTTL: time.Second},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)})
	o.RecoverAfter = 1500 * time.Millisecond // long enough to see counter IDs once Redis is back
	n := newNode(t, o)
	if n.Mode() != node.ModeFlake {
		t.Fatalf("started in %s mode", n.Mode())
	}
	is := startIssuer(n)
	waitFor(t, 5*time.Second, "flake IDs", func() bool { return is.count() > 1000 })
	srv.Pause()
	paused := time.Now()
	waitFor(t, 5*time.Second, "the fallback to counter mode", func() bool { return n.Mode() == node.ModeCounter })
	if since := time.Since(paused); since > 2*time.Second {
		t.Fatalf("fell back %v after Redis went away; the reservation lasts 150ms", since)
	}
	time.Sleep(1500 * time.Millisecond) // longer than the lease TTL
	before := is.count()
	srv.Resume()
	waitFor(t, 10*time.Second, "counter IDs", func() bool {
		is.mu.Lock()
		defer is.mu.Unlock()
		return len(is.ids) > before && slices.Contains(is.modes, node.ModeCounter)
	})
	waitFor(t, 15*time.Second, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	after := is.count()
	waitFor(t, 5*time.Second, "flake IDs after the return", func() bool { return is.count() > after+1000 })
	is.halt()

	l := n.Layout()
	strictlyIncreasing(t, l, "auto node", is.ids)
	findDuplicates(t, l, is.ids)
	if !slices.Contains(is.modes, node.ModeCounter) || is.modes[len(is.modes)-1] != node.ModeFlake {
		t.Fatalf("modes seen: %v", is.modes)
	}
	if is.errs == 0 {
		t.Fatal("no NextID failed while Redis was paused: something issued without Redis")
	}
	evs := modeEvents(t, rdb)
	if !slices.Contains(evs, "flake->counter") || !slices.Contains(evs, "counter->flake") {
		t.Fatalf("mode events: %v", evs)
	}
	if n.Switches() < 2 {
		t.Fatalf("%d switches", n.Switches())
	}
}

// In auto mode a node whose clock is behind the reservation of every
// machine ID it could take falls back to counter mode, and returns to
// flake mode once its clock has caught up. The machine-ID space is tiny
// (2 bits: IDs 0, 1, 2) so that the other IDs are held by live nodes.
func TestAuto_ClockBehindFloor_FallsBackAndReturns(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	l, err := flake.NewLayout(8, 2, 10*time.Millisecond, flake.DefaultStartTime)
	if err != nil {
		t.Fatal(err)
	}
	reg := coord.Options{Layout: l, MaxSkew: 10 * time.Second}
	state := filepath.Join(t.TempDir(), "b.state")
	// The first owner of the state file's ID runs, then stops cleanly: its
	// ID's reservation is its last tick, about now.
	a := newNode(t, node.Options{Redis: rdb, Registry: reg, StateFile: state})
	first := issue(t, a, 5000)
	if err := a.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the other two IDs are held
		newNode(t, node.Options{Redis: rdb, Registry: reg})
	}
	// Restarted with its clock 4 s back: the state file's ID starts 4 s
	// ahead of it, more than max wait.
	clk := flake.NewOffsetClock(-4 * time.Second)
	breg := reg
	breg.MaxWait = time.Second
	b := newNode(t, fast(node.Options{Redis: rdb, Registry: breg, StateFile: state, Mode: node.ModeAuto, Clock: clk}))
	if b.Mode() != node.ModeCounter {
		t.Fatalf("clock 4 s behind the floor: mode %s, want counter", b.Mode())
	}
	is := startIssuer(b)
	waitFor(t, 5*time.Second, "counter IDs", func() bool { return is.count() > 500 })
	clk.Set(0) // the clock is fixed
	waitFor(t, 10*time.Second, "the return to flake mode", func() bool { return b.Mode() == node.ModeFlake })
	after := is.count()
	waitFor(t, 5*time.Second, "flake IDs", func() bool { return is.count() > after+500 })
	is.halt()

	strictlyIncreasing(t, l, "node b", is.ids)
	findDuplicates(t, l, append(slices.Clone(first), is.ids...))
	last := is.ids[len(is.ids)-1]
	if m := l.Decompose(last).MachineID; m == l.CounterMachineID() {
		t.Fatalf("last ID %d is a counter ID after the return to flake mode", last)
	}
	if is.modes[0] != node.ModeCounter || is.modes[len(is.modes)-1] != node.ModeFlake {
		t.Fatalf("modes seen: %v", is.modes)
	}
}

// The clock guard: a node whose wall clock is an hour off Redis TIME
// starts in counter mode (auto) and returns when the clock is fixed; in
// flake mode it refuses to start, naming the skew.
func TestAuto_ClockSkewed_CounterUntilFixed(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	clk := flake.NewOffsetClock(-time.Hour)
	if _, err := node.New(ctxT(t), node.Options{Redis: rdb, Clock: clk}); !errors.Is(err, coord.ErrClockSkew) {
		t.Fatalf("flake mode with a clock 1h off: err = %v, want ErrClockSkew", err)
	}
	n := newNode(t, fast(node.Options{Redis: rdb, Mode: node.ModeAuto, Clock: clk}))
	if n.Mode() != node.ModeCounter {
		t.Fatalf("auto mode with a clock 1h off: mode %s", n.Mode())
	}
	ids := issue(t, n, 2000)
	clk.Set(0)
	waitFor(t, 15*time.Second, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	ids = append(ids, issue(t, n, 2000)...)
	strictlyIncreasing(t, n.Layout(), "node", ids)
}

// In flake mode, Redis away until the reservation is spent gives a clear
// error (never a guessed ID); when Redis is back the node goes on above
// everything it issued.
func TestFlake_RedisAway_ReservationSpent_ClearError(t *testing.T) {
	srv := realRedis(t)
	n := newNode(t, node.Options{Redis: client(t, srv), MaxLead: 20 * time.Millisecond,
		ReserveAhead: 50 * time.Millisecond, Registry: coord.Options{LeaseTTL: 3 * time.Second}})
	ids := issue(t, n, 1000)
	srv.Pause()
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		var id uint64
		id, err = n.NextID(ctx)
		cancel()
		if err == nil {
			ids = append(ids, id)
		}
	}
	// Readiness follows within a Redis timeout (a reservation in flight
	// has not failed yet).
	deadline = time.Now().Add(3 * time.Second)
	for n.Ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ready := n.Ready()
	srv.Resume()
	if !errors.Is(err, flake.ErrReserve) {
		t.Fatalf("NextID with Redis away: err = %v, want ErrReserve", err)
	}
	if ready {
		t.Fatal("node is ready with its reservation spent")
	}
	ids = append(ids, issue(t, n, 1000)...)
	strictlyIncreasing(t, n.Layout(), "node", ids)
}

// In flake mode a lost lease (another owner's claim moved the reservation)
// is replaced by a fresh claim; IDs go on strictly increasing.
func TestFlake_LeaseLost_Reclaims(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	n := newNode(t, fast(node.Options{Redis: rdb, Registry: coord.Options{LeaseTTL: time.Second}}))
	ids := issue(t, n, 2000)
	old := n.MachineIDs()[0]
	// What a takeover looks like to the old owner: its lease key gone and
	// the reservation moved past its grant.
	ctx := ctxT(t)
	mid := strconv.Itoa(old)
	if err := rdb.Del(ctx, "{flaked}:lease:"+mid).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HIncrBy(ctx, "{flaked}:reserved", mid, 1000).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a new lease", func() bool {
		m := n.MachineIDs()
		return len(m) == 1 && m[0] != old
	})
	ids = append(ids, issue(t, n, 2000)...)
	strictlyIncreasing(t, n.Layout(), "node", ids)
	for _, id := range ids[2000:] {
		if p := n.Layout().Decompose(id); p.MachineID == old && p.Tick > n.Layout().Tick(time.Now())-500 {
			// IDs under the old ID after the loss must be within its grant,
			// which the test moved the reservation past.
			res, _ := rdb.HGet(ctx, "{flaked}:reserved", mid).Int64()
			if p.Tick > res {
				t.Fatalf("ID %d under the lost machine ID %d at tick %d, above its reservation %d", id, old, p.Tick, res)
			}
		}
	}
}

// A node with k machine IDs issues k x 2^seq IDs per tick without waiting,
// interleaving its IDs in ascending order inside each (tick, sequence).
func TestMachineIDs_K_InterleavesAndMultipliesRate(t *testing.T) {
	// Standalone: a new registry on Redis starts IDs a horizon ahead,
	// which a fake clock that does not move would never reach.
	clk := flaketest.NewClock(time.Now())
	n := newNode(t, node.Options{MachineIDs: 4, MaxLead: time.Nanosecond, Clock: clk})
	clk.Advance(100 * time.Millisecond) // past the floor: the store's clock ran on since the fake one was made
	mids := n.MachineIDs()
	slices.Sort(mids)
	ids := make([]uint64, 4*256)
	if got, err := n.NextIDs(ctxT(t), ids); err != nil || got != len(ids) {
		t.Fatalf("NextIDs(1024) in one tick: %d, %v", got, err)
	}
	l := n.Layout()
	strictlyIncreasing(t, l, "node", ids)
	tick := l.Decompose(ids[0]).Tick
	for i, id := range ids {
		p := l.Decompose(id)
		if p.Tick != tick || p.Sequence != i/4 || p.MachineID != mids[i%4] {
			t.Fatalf("ID %d: %+v, want tick %d, sequence %d, machine %d", i, p, tick, i/4, mids[i%4])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.NextID(ctx); !errors.Is(err, flake.ErrMaxLead) {
		t.Fatalf("the 1025th ID in one tick: err = %v, want ErrMaxLead", err)
	}
}

// Auto mode starts even when Redis does not answer: in counter mode, not
// ready, NextID failing clearly (never a guessed ID); once Redis answers it
// issues, and returns to flake mode.
func TestAuto_StartsWithRedisAway(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	srv.Pause()
	n := newNode(t, fast(node.Options{Redis: rdb, Mode: node.ModeAuto}))
	if n.Mode() != node.ModeCounter || n.Ready() {
		t.Fatalf("started with Redis away: mode %s, ready %v; want counter, not ready", n.Mode(), n.Ready())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := n.NextID(ctx)
	cancel()
	if !errors.Is(err, fallback.ErrUnavailable) {
		t.Fatalf("NextID with Redis away: %v, want ErrUnavailable", err)
	}
	srv.Resume()
	ids := issue(t, n, 100)
	waitFor(t, 20*time.Second, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	ids = append(ids, issue(t, n, 1000)...)
	strictlyIncreasing(t, n.Layout(), "node", ids)
	if !n.Ready() {
		t.Fatal("not ready in flake mode with Redis back")
	}
}
