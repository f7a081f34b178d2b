package node_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

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
	drained := 0
	for _, id := range is.ids[lost:] {
		if d := lay.Decompose(id); d.MachineID == 0 && d.Tick <= granted {
			drained++
		}
	}
	if drained == 0 {
		t.Errorf("A issued nothing under its grant (tick <= %d) after its lease was lost", granted)
	}
	idtest.Unique(t, lay, slices.Concat(is.ids, fromB))
}
