package node_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
)

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

// counterAfter says whether IDs were issued after the first n and counter
// mode was seen.
func (is *issuer) counterAfter(n int) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return len(is.ids) > n && slices.Contains(is.modes, node.ModeCounter)
}

// backToFlake waits up to d for n's return to flake mode and then for 1000
// IDs more, and stops the issuer.
func (is *issuer) backToFlake(t *testing.T, n *node.Node, d time.Duration) {
	t.Helper()
	poll.Until(t, d, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	after := is.count()
	poll.Until(t, 5*time.Second, "flake IDs after the return", func() bool { return is.count() > after+1000 })
	is.halt()
}

// checkIDs fails unless the IDs issued strictly increase and are unique.
func (is *issuer) checkIDs(t *testing.T, l flake.Layout, name string) {
	t.Helper()
	idtest.Increasing(t, l, name, is.ids)
	idtest.Unique(t, l, is.ids)
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
	poll.Until(t, 5*time.Second, "flake IDs", func() bool { return is.count() > 1000 })
	srv.Pause()
	paused := time.Now()
	poll.Until(t, 5*time.Second, "the fallback to counter mode", func() bool { return n.Mode() == node.ModeCounter })
	if since := time.Since(paused); since > 2*time.Second {
		t.Fatalf("fell back %v after Redis went away; the reservation lasts 150ms", since)
	}
	// The lease must expire on Redis's own clock, which no injected clock
	// moves: wait out its TTL (1 s) in real time.
	time.Sleep(1500 * time.Millisecond)
	before := is.count()
	srv.Resume()
	poll.Until(t, 10*time.Second, "counter IDs", func() bool { return is.counterAfter(before) })
	is.backToFlake(t, n, 15*time.Second)

	is.checkIDs(t, n.Layout(), "auto node")
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
	clk := clock.NewOffset(-4 * time.Second)
	breg := reg
	breg.MaxWait = time.Second
	b := newNode(t, fast(node.Options{Redis: rdb, Registry: breg, StateFile: state, Mode: node.ModeAuto, Clock: clk}))
	if b.Mode() != node.ModeCounter {
		t.Fatalf("clock 4 s behind the floor: mode %s, want counter", b.Mode())
	}
	is := startIssuer(b)
	poll.Until(t, 5*time.Second, "counter IDs", func() bool { return is.count() > 500 })
	clk.Set(0) // the clock is fixed
	poll.Until(t, 10*time.Second, "the return to flake mode", func() bool { return b.Mode() == node.ModeFlake })
	after := is.count()
	poll.Until(t, 5*time.Second, "flake IDs", func() bool { return is.count() > after+500 })
	is.halt()

	idtest.Increasing(t, l, "node b", is.ids)
	idtest.Unique(t, l, append(slices.Clone(first), is.ids...))
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
	clk := clock.NewOffset(-time.Hour)
	if _, err := node.New(ctxT(t), node.Options{Redis: rdb, Clock: clk}); !errors.Is(err, coord.ErrClockSkew) {
		t.Fatalf("flake mode with a clock 1h off: err = %v, want ErrClockSkew", err)
	}
	n := newNode(t, fast(node.Options{Redis: rdb, Mode: node.ModeAuto, Clock: clk}))
	if n.Mode() != node.ModeCounter {
		t.Fatalf("auto mode with a clock 1h off: mode %s", n.Mode())
	}
	ids := issue(t, n, 2000)
	clk.Set(0)
	poll.Until(t, 15*time.Second, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	ids = append(ids, issue(t, n, 2000)...)
	idtest.Increasing(t, n.Layout(), "node", ids)
}

// Auto mode starts even when Redis does not answer: in counter mode, not
// ready, NextID failing clearly (never a guessed ID); once Redis answers it
// issues, and returns to flake mode.
func TestAuto_StartsWithRedisAway(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	o := fast(node.Options{Redis: rdb, Mode: node.ModeAuto})
	initRegistry(t, o) // the fleet's, made before Redis went away
	srv.Pause()
	n := newNode(t, o)
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
	poll.Until(t, 20*time.Second, "the return to flake mode", func() bool { return n.Mode() == node.ModeFlake })
	ids = append(ids, issue(t, n, 1000)...)
	idtest.Increasing(t, n.Layout(), "node", ids)
	if !n.Ready() {
		t.Fatal("not ready in flake mode with Redis back")
	}
}

// Fault: Redis restarts (or fails over) under a running auto node. Redis
// cannot tell a clean restart from a lossy one, so the node's lease is
// lost ("loss") and claimed again at the loss floor, seconds ahead of the
// clock, which Redis grants past only a skew (1 s) after the loss. The
// issuer here spends the grant held before the loss sooner than that, so
// in auto mode the node serves counter IDs until Redis grants past the
// floor rather than make every caller wait, then returns to flake mode,
// ahead of its clock. IDs stay unique and strictly increasing across both
// switches.
func TestAuto_RedisRestart_CounterUntilTheNewLeaseStarts(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	// A reach of 1 s (max lead 1 s, max skew 1 s), which the issuer spends
	// within the second Redis takes to grant past the loss floor.
	o := fast(node.Options{Redis: rdb, Mode: node.ModeAuto, ReserveAhead: time.Second, Registry: coord.Options{LeaseTTL: 3 * time.Second},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)})
	o.CheckInterval = node.DefaultCheckInterval // the lease's loss, not a check, starts the switch
	n := newNode(t, o)
	is := startIssuer(n)
	poll.Until(t, 5*time.Second, "flake IDs", func() bool { return is.count() > 1000 })
	srv.Kill()
	srv.Restart(t)
	restarted := is.count()
	poll.Until(t, 20*time.Second, "counter IDs after the restart", func() bool { return is.counterAfter(restarted) })
	is.backToFlake(t, n, 20*time.Second)

	is.checkIDs(t, n.Layout(), "auto node")
	if want := []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeFlake}; !slices.Equal(is.modes, want) {
		t.Fatalf("modes seen: %v, want %v", is.modes, want)
	}
	// The switch is made before a generator at the new floor serves anyone
	// (callers would wait for it), not once such a generator fails.
	evs, err := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Values["type"] == "mode" && e.Values["to"] == "counter" {
			if r := fmt.Sprint(e.Values["reason"]); !strings.Contains(r, "the new lease starts") {
				t.Fatalf("fell back to counter mode because %q, want: the new lease starts ahead of the clock", r)
			}
			return
		}
	}
	t.Fatal("no mode event to counter mode")
}
