package node_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/faultproxy"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// Fault: one of the master's two replicas unreachable (its host rebooting,
// its link held), under a node issuing 20,000 IDs/s in each mode. Every
// grant's WAIT then times out: the grant is not used (ErrNotReplicated),
// though renew.lua or counter.lua ran on the master. Guard: that is no
// reason to stop issuing below what was granted and acknowledged before
// (coord.Lease.Reserve says why it is safe), so the node issues for its
// reach less a second at least, in counter mode too (its counter reaches
// as far ahead as a flake reservation: with a lead of a second it held
// 1.3 s at this rate), and stops once that is spent, granting nothing no
// replica holds. Every ID before, during and after is checked: unique and
// strictly increasing (an ID issued past an acknowledged grant could
// repeat after a failover to a replica without it).
func TestNode_ReplicaAway_IssuesForTheReach(t *testing.T) {
	for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
		t.Run(mode.String(), func(t *testing.T) { replicaAway(t, mode) })
	}
}

func replicaAway(t *testing.T, mode node.Mode) {
	redistest.Require(t)
	const reach = 3 * time.Second
	noDelay := "repl-diskless-sync-delay 0"
	m := redistest.Start(t, redistest.Options{Args: []string{noDelay}})
	link := faultproxy.Start(t, m.Addr())
	redistest.Start(t, redistest.Options{Args: []string{noDelay, "replicaof 127.0.0.1 " + strconv.Itoa(m.Port())}})
	redistest.Start(t, redistest.Options{Args: []string{noDelay, "replicaof 127.0.0.1 " + strconv.Itoa(link.Port())}})
	rdb := client(t, m)
	poll.UntilNil(t, 20*time.Second, "two replicas online and acknowledging", func() error { return acked(rdb, 2) })
	o := node.Options{Redis: rdb, Mode: mode, ReserveAhead: reach, Counter: fallback.Options{Hold: reach},
		Registry: coord.Options{LeaseTTL: 2 * time.Second}}
	// A counter in use, behind the clock: a counter made anew (its first
	// use, or after a loss) starts its lead ahead of Redis TIME, and holds
	// its reach only once the clock caught up with it (docs/modes.md).
	initRegistry(t, o)
	now, err := rdb.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctxT(t), contract.NewKeys(coord.DefaultNamespace).Counter, "tick", flake.DefaultLayout().Tick(now)-1, "seq", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, o)

	var ids []uint64
	buf := make([]uint64, 200)
	// take asks for 200 IDs every 10 ms until d passes or a request fails,
	// and returns how long it issued.
	take := func(d time.Duration) time.Duration {
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			got, err := n.NextIDs(ctx, buf)
			cancel()
			ids = append(ids, buf[:got]...)
			if err != nil || time.Since(start) > d {
				return time.Since(start)
			}
		}
		return 0
	}
	if d := take(4 * time.Second); d < 4*time.Second {
		t.Fatalf("%s node stopped %v into the warm-up, with both replicas up", mode, d)
	}
	link.Blackhole()
	issued := take(20 * time.Second)
	// The reach less a second (renewals come once a second), less a
	// quarter second for the requests' own timing.
	if want := reach - time.Second - 250*time.Millisecond; issued < want {
		t.Errorf("%s node issued for %v after a replica went away; want its reach less a second (%v)", mode, issued, want)
	}
	if issued >= 20*time.Second {
		t.Errorf("%s node issued for 20 s with no grant acknowledged: past every grant it held", mode)
	}
	t.Logf("%s node issued for %v after the replica went away", mode, issued)
	link.Heal()
	poll.UntilNil(t, 20*time.Second, "the replica back", func() error { return acked(rdb, 2) })
	poll.Until(t, 20*time.Second, "IDs again", func() bool { return take(time.Second) >= time.Second })
	l := n.Layout()
	idtest.Increasing(t, l, mode.String()+" node", ids)
	idtest.Unique(t, l, ids)
}

// acked is nil once n replicas acknowledge a write to the master behind
// rdb (a replica just synced acknowledges from its first periodic ACK on).
func acked(rdb redis.UniversalClient, n int) error {
	c := rdb.(*redis.Client)
	ctx := context.Background()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "probe", 1, 0).Err(); err != nil {
		return err
	}
	got, err := conn.Wait(ctx, n, 500*time.Millisecond).Result()
	if err == nil && got < int64(n) {
		err = fmt.Errorf("%d of %d replicas acknowledged a write", got, n)
	}
	return err
}

// A node restores a {ns}:meta Redis lost with the mark of its last grant
// used, whichever kind of grant used it: its registry, its counter and its
// sequences share one (coord's TestReplicaWait_MetaLost_CounterRestoresTheProcessMark
// shows the duplicate a counter's own mark, none before its first
// segment, lets through).
func TestNode_GrantsShareTheRegistryMark(t *testing.T) {
	n := newNode(t, node.Options{Redis: client(t, realRedis(t)), Mode: node.ModeFlake})
	reg, counter, seqs, err := n.Marks()
	if err != nil {
		t.Fatal(err)
	}
	if reg == nil || counter != reg || seqs != reg {
		t.Fatalf("mark memories: registry %p, counter %p, sequences %p; want one", reg, counter, seqs)
	}
}
