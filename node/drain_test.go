package node_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// Fault: Redis restarts under a flake node (with AOF nothing is lost, but
// Redis cannot tell a clean restart from a lossy one; without, it comes
// back empty, the lease gone), in a layout with a
// single leasable machine ID, and a second node claims that ID right
// after. Guard (drain.go): the first node's lease is lost ("possible data
// loss") and its generator goes on under what it had already granted
// while it claims again; the second node takes the machine ID at the loss
// floor, above every grant made before the loss. A duplicate shows as an
// ID issued by both: the drained ticks and the second node's meet on the
// one machine ID if the drain reached past the grant or the floor did not
// cover it. The test also shows that the first node issued after it knew
// its lease lost (the drain happened).
func TestFlake_RedisRestart_DrainsGrantWhileOtherClaimsAtLossFloor(t *testing.T) {
	redistest.Require(t)
	// With AOF nothing is lost; without, the restart loses everything,
	// A's lease with it: the loss is what A's renewal reads first.
	for _, aof := range []bool{true, false} {
		t.Run(map[bool]string{true: "aof", false: "empty"}[aof], func(t *testing.T) {
			drainAcrossRestart(t, aof)
		})
	}
}

func drainAcrossRestart(t *testing.T, aof bool) {
	srv := redistest.Start(t, redistest.Options{AOF: aof})
	lay, err := flake.NewLayout(8, 1, 0, time.Time{}) // machine ID 0 leasable, 1 the counter's
	if err != nil {
		t.Fatal(err)
	}
	// A holds 2 s or more of reservation (a reach of 3 s), more than the
	// restart takes, so it has ticks left to drain once it reads the loss.
	// A takes no machine ID further ahead of its clock than 500 ms, so
	// after the loss it cannot claim the ID again at the loss floor (about
	// 4 s ahead) and keeps draining; B waits for it. The registry looks
	// as if this server had always held it, so A's first claim has no
	// floor to wait for.
	opts := func(maxWait time.Duration) node.Options {
		return fast(node.Options{Redis: client(t, srv), Registry: coord.Options{Layout: lay, LeaseTTL: 3 * time.Second,
			MaxWait: maxWait}, ReserveAhead: 3 * time.Second, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	}
	if err := redistest.ForgetLoss(ctxT(t), client(t, srv), coord.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	a := newNode(t, opts(500*time.Millisecond))
	is := startIssuer(a)
	poll.Until(t, 5*time.Second, "IDs from A", func() bool { return is.count() > 1000 })
	old := a.Lease()
	srv.Kill()
	srv.Restart(t)
	// A's next reservation or renewal finds the server changed.
	poll.Until(t, 10*time.Second, "A's lease lost to the restart", func() bool { return old.Err() != nil })
	if !errors.Is(old.Err(), coord.ErrPossibleLoss) {
		t.Fatalf("A's lease lost with %v, want ErrPossibleLoss", old.Err())
	}
	lost := is.count()
	granted := old.Granted()
	// B claims the only machine ID, which A gave up, while A may still
	// issue under its grant.
	var b *node.Node
	poll.Until(t, 10*time.Second, "B's claim", func() bool {
		n, err := node.New(context.Background(), opts(time.Minute))
		if err != nil {
			return false
		}
		b = n
		return true
	})
	t.Cleanup(func() { b.Close(context.Background()) })
	if b.Lease().Floor() <= granted {
		t.Fatalf("B starts after tick %d, not above A's grant %d from before the loss", b.Lease().Floor(), granted)
	}
	// B's floor is past Redis TIME + the horizon for about a second and
	// past its max lead for longer: its first NextID waits for the clock.
	var fromB []uint64
	deadline := time.Now().Add(10 * time.Second)
	for len(fromB) < 2000 {
		id, err := b.NextID(ctxT(t))
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		fromB = append(fromB, id)
	}
	is.halt()
	is.checkIDs(t, lay, "A")
	if drained := drainedIDs(lay, is.ids[lost:], granted); drained == 0 {
		t.Errorf("A issued nothing under its grant (tick <= %d) after its lease was lost", granted)
	}
	idtest.Unique(t, lay, slices.Concat(is.ids, fromB))
}

// Fault: Redis evicts a flake node's lease key (maxmemory-policy
// volatile-*, the lease keys the only ones with a TTL), in a layout with a
// single leasable machine ID, and a second node takes that ID over before
// the first one's next renewal. An evicted lease reads as an expired one. Guard (drain.go): the
// first node's generator goes on under what it had already granted while
// it claims again (it stopped at once before, and waited for a machine ID
// with nothing to issue); the second node takes the ID over above its
// reservation, which holds every grant the first one used. A duplicate
// shows as an ID issued by both, which the drained ticks and the second
// node's would share if the drain reached past the grant or the takeover
// started below it.
func TestFlake_LeaseEvicted_DrainsGrantWhileOtherTakesItOver(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	lay, err := flake.NewLayout(8, 1, 0, time.Time{}) // machine ID 0 leasable, 1 the counter's
	if err != nil {
		t.Fatal(err)
	}
	opts := fast(node.Options{Redis: client(t, srv), Registry: coord.Options{Layout: lay}, ReserveAhead: 3 * time.Second,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	a := newNode(t, opts)
	is := startIssuer(a)
	poll.Until(t, 5*time.Second, "IDs from A", func() bool { return is.count() > 1000 })
	old := a.Lease()
	evict(t, srv, old)
	// B takes the ID over before A's next renewal finds its lease gone.
	b, err := node.New(ctxT(t), opts)
	if err != nil {
		t.Fatalf("B's claim of the evicted machine ID: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	poll.Until(t, 10*time.Second, "A's lease lost", func() bool { return old.Err() != nil })
	lost, granted := is.count(), old.Granted()
	if b.Lease().Floor() < granted {
		t.Fatalf("B starts after tick %d, below A's grant %d", b.Lease().Floor(), granted)
	}
	fromB := issue(t, b, 2000)
	poll.Until(t, 5*time.Second, "A issuing after its lease was lost", func() bool { return is.count() > lost+1000 })
	is.halt()
	is.checkIDs(t, lay, "A")
	if drained := drainedIDs(lay, is.ids[lost:], granted); drained < 1000 {
		t.Errorf("A issued %d IDs under its grant (tick <= %d) after its lease was lost; want it to issue on", drained, granted)
	}
	idtest.Unique(t, lay, slices.Concat(is.ids, fromB))
}

// Fault: as above, the lease key evicted, with the machine ID free
// afterwards and another one free that was never used (its floor below
// the clock, which a claim takes first). Guard: the node claims its own
// machine ID again (its floor is the node's own reservation), issuing on
// under its grant meanwhile, so no caller waits and its IDs stay on the
// machine ID it had. Every ID checked: unique and strictly increasing.
func TestFlake_LeaseEvicted_ClaimsItsOwnIDAgain_NoWait(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	lay, err := flake.NewLayout(8, 2, 0, time.Time{}) // machine IDs 0-2 leasable
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, fast(node.Options{Redis: client(t, srv), Registry: coord.Options{Layout: lay}}))
	is := startIssuer(n)
	poll.Until(t, 5*time.Second, "IDs", func() bool { return is.count() > 1000 })
	old := n.Lease()
	evict(t, srv, old)
	poll.Until(t, 10*time.Second, "a lease in place of the evicted one", func() bool {
		l := n.Lease()
		return old.Err() != nil && l != nil && l != old
	})
	after := is.count()
	poll.Until(t, 5*time.Second, "IDs under the new lease", func() bool { return is.count() > after+1000 })
	is.halt()
	is.checkIDs(t, lay, "node")
	if is.errs != 0 {
		t.Errorf("%d NextID calls failed across the eviction; want none (the grant held covers the claim)", is.errs)
	}
	if got, want := n.Lease().MachineIDs(), old.MachineIDs(); !slices.Equal(got, want) {
		t.Errorf("claimed machine IDs %v after the eviction; want its own %v again", got, want)
	}
}

// evict deletes the lease keys of l, as Redis evicting them would.
func evict(t *testing.T, srv *redistest.Server, l *coord.Lease) {
	t.Helper()
	keys := contract.NewKeys(coord.DefaultNamespace)
	for _, id := range l.MachineIDs() {
		if err := srv.Client(t).Del(ctxT(t), keys.Lease(strconv.Itoa(id))).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// drainedIDs counts the IDs of machine ID 0 at or below granted: those
// issued under a grant made before the lease was lost.
func drainedIDs(lay flake.Layout, ids []uint64, granted int64) int {
	n := 0
	for _, id := range ids {
		if d := lay.Decompose(id); d.MachineID == 0 && d.Tick <= granted {
			n++
		}
	}
	return n
}

// Fault: as above, an auto node's lease evicted and its only machine ID
// taken over, so its claims are refused (no machine ID free) for as long
// as the other node holds it: a claim refused for a while, as through
// Sentinel right after a failover that not every Sentinel has seen.
// Guard: in auto mode too the generator goes on under what the lost lease
// had granted, trying the claim again, and counter mode takes over only
// once that grant is nearly spent. A duplicate shows as an ID issued by
// two of: A's drain, A's counter, B. The drained IDs spanning a second of
// ticks or more (of A's 3 s reach) show the drain lasted; falling back at
// the loss spans a health check or two.
func TestAuto_LeaseEvicted_DrainsGrantBeforeCounter(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	lay, err := flake.NewLayout(8, 1, 0, time.Time{}) // machine ID 0 leasable, 1 the counter's
	if err != nil {
		t.Fatal(err)
	}
	opts := fast(node.Options{Redis: client(t, srv), Registry: coord.Options{Layout: lay}, ReserveAhead: 3 * time.Second,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	aopts := opts
	aopts.Mode = node.ModeAuto
	a := newNode(t, aopts)
	is := startIssuer(a)
	poll.Until(t, 5*time.Second, "IDs from A", func() bool { return is.count() > 1000 })
	old := a.Lease()
	evict(t, srv, old)
	b, err := node.New(ctxT(t), opts)
	if err != nil {
		t.Fatalf("B's claim of the evicted machine ID: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	poll.Until(t, 10*time.Second, "A's lease lost", func() bool { return old.Err() != nil })
	lost, granted := is.count(), old.Granted()
	fromB := issue(t, b, 2000)
	poll.Until(t, 15*time.Second, "A in counter mode once its grant is spent", func() bool { return a.Mode() == node.ModeCounter })
	after := is.count()
	poll.Until(t, 5*time.Second, "counter IDs from A", func() bool { return is.count() > after+1000 })
	is.halt()
	is.checkIDs(t, lay, "A")
	first, last := int64(-1), int64(-1)
	for _, id := range is.ids[lost:] {
		if d := lay.Decompose(id); d.MachineID == 0 && d.Tick <= granted {
			if first < 0 {
				first = d.Tick // the IDs increase: the first is the lowest
			}
			last = d.Tick
		}
	}
	if span := time.Duration(last-first) * lay.TimeUnit; first < 0 || span < time.Second {
		t.Errorf("A's IDs under its lost lease span %v of ticks after the loss; want a second or more of its 3 s reach", span)
	}
	idtest.Unique(t, lay, slices.Concat(is.ids, fromB))
}
