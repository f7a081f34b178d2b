package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/clock/clocktest"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
)

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
	got := eachNode(nodes, func(i int, n *node.Node) []uint64 {
		ids := make([]uint64, plans[i].ids)
		for off := 0; off < len(ids); off += 500 {
			if _, err := n.NextIDs(ctxT(t), ids[off:min(off+500, len(ids))]); err != nil {
				t.Error(err)
				return nil
			}
		}
		return ids
	})
	if t.Failed() {
		return
	}
	l = nodes[0].Layout()
	var all []uint64
	seen := map[int]int{}
	for i, ids := range got {
		idtest.Increasing(t, l, fmt.Sprintf("node %d (%s)", i, plans[i].mode), ids)
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
	idtest.Unique(t, l, all)
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
	for range 2 {
		// A key nobody writes again shows the restart lost everything (the
		// counter key itself the node may have written again by then).
		if err := srv.Client(t).Set(ctxT(t), "marker", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		srv.Kill() // no persistence: the counter is gone
		srv.Restart(t)
		if v, err := srv.Client(t).Exists(ctxT(t), "marker").Result(); err != nil || v != 0 {
			t.Fatalf("a key written before the restart: exists %d, %v; want it lost", v, err)
		}
		take(len(ids) + 30_000)
	}
	l := n.Layout()
	idtest.Increasing(t, l, "counter node", ids)
	idtest.Unique(t, l, ids)
	if n.Mode() != node.ModeCounter {
		t.Fatalf("mode %s", n.Mode())
	}
}

// A node with k machine IDs issues k x 2^seq IDs per tick without waiting,
// interleaving its IDs in ascending order inside each (tick, sequence).
func TestMachineIDs_K_InterleavesAndMultipliesRate(t *testing.T) {
	// Standalone: a new registry on Redis starts IDs a horizon ahead,
	// which a fake clock that does not move would never reach.
	clk := clocktest.New(time.Now())
	n := newNode(t, node.Options{MachineIDs: 4, MaxLead: time.Nanosecond, Clock: clk})
	clk.Advance(100 * time.Millisecond) // past the floor: the store's clock ran on since the fake one was made
	mids := n.MachineIDs()
	slices.Sort(mids)
	ids := make([]uint64, 4*256)
	if got, err := n.NextIDs(ctxT(t), ids); err != nil || got != len(ids) {
		t.Fatalf("NextIDs(1024) in one tick: %d, %v", got, err)
	}
	l := n.Layout()
	idtest.Increasing(t, l, "node", ids)
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
