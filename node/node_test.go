package node_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/redisurl"
)

// ctxT bounds a test's calls to a node: 30 s.
func ctxT(t *testing.T) context.Context { return idtest.Context(t, 30*time.Second) }

func issue(t *testing.T, g node.Generator, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	tg, _ := g.(node.TryGenerator)
	var one [1]uint64
	for i := range n {
		// Every other ID goes the daemon's event-loop way: TryNextIDs
		// first, NextID when it says no.
		if tg != nil && i%2 == 1 && tg.TryNextIDs(one[:]) {
			ids = append(ids, one[0])
			continue
		}
		id, err := g.NextID(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestStandalone_RestartWithStateFile_NoDuplicate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.state")
	var all []uint64
	var mid []int
	var l flake.Layout
	for round := range 3 {
		n, err := node.New(ctxT(t), node.Options{StateFile: path})
		if err != nil {
			t.Fatal(err)
		}
		l = n.Layout()
		if !n.Standalone() {
			t.Fatal("node without Redis is not standalone")
		}
		ids := issue(t, n, 30_000) // more than one tick's worth: borrows ahead
		if round > 0 && ids[0] <= all[len(all)-1] {
			t.Fatalf("restart %d issued %d, not above the last ID before it %d", round, ids[0], all[len(all)-1])
		}
		all = append(all, ids...)
		mid = append(mid, n.MachineIDs()...)
		if round == 1 {
			// A crash: no Close. The state file carries the reservation.
			n.Crash()
			continue
		}
		if err := n.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	idtest.Increasing(t, l, "across restarts", all)
	if mid[0] != mid[1] || mid[1] != mid[2] {
		t.Fatalf("machine IDs across restarts: %v", mid)
	}
}

// stateNode starts a node with 2 machine IDs on Redis at url, with the
// state file path; the caller closes it.
func stateNode(t *testing.T, url, path string) *node.Node {
	t.Helper()
	rdb, err := redisurl.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	o := node.Options{Redis: rdb, StateFile: path, MachineIDs: 2}
	initRegistry(t, o)
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFleet_RealRedis_DistinctMachineIDs_NoDuplicate_RestartReusesID(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	dir := t.TempDir()
	start := func(i int) *node.Node {
		return stateNode(t, srv.URL(), filepath.Join(dir, string(rune('a'+i))+".state"))
	}
	var nodes []*node.Node
	for i := range 3 {
		nodes = append(nodes, start(i))
	}
	var mids []int
	for _, n := range nodes {
		mids = append(mids, n.MachineIDs()...)
	}
	slices.Sort(mids)
	if len(slices.Compact(slices.Clone(mids))) != 6 {
		t.Fatalf("3 nodes x 2 machine IDs: %v", mids)
	}
	var all []uint64
	for _, ids := range eachNode(nodes, func(_ int, n *node.Node) []uint64 {
		ids := issue(t, n, 50_000)
		idtest.Increasing(t, n.Layout(), "", ids)
		return ids
	}) {
		all = append(all, ids...)
	}
	// Clean restart of node 0: same machine IDs, at once, IDs above before.
	before := nodes[0].MachineIDs()
	if err := nodes[0].Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	n0 := start(0)
	defer n0.Close(context.Background())
	id, err := n0.NextID(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited > 2*time.Second {
		t.Fatalf("clean restart took %v to its first ID", waited)
	}
	if !slices.Equal(n0.MachineIDs(), before) {
		t.Fatalf("restart got machine IDs %v, had %v", n0.MachineIDs(), before)
	}
	all = append(all, id)
	all = append(all, issue(t, n0, 10_000)...)
	idtest.Unique(t, n0.Layout(), all)
	for _, n := range nodes[1:] {
		if err := n.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}
