package node_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
)

// Two regions, each a fleet on its own real redis-server, in a machine
// space of 4 bits split by 1 region bit: 4 nodes each (flake, flake,
// counter, auto) taking IDs as fast as they can for the same 2.5 s, none
// issued twice. Every machine ID is inside its node's region's range, and
// counter IDs carry their region's own counter machine ID. The counters
// run at their capacity (every sequence of every tick), so in the window
// both run they hand out the same (tick, sequence) pairs (checked): a
// fleet-wide counter machine ID would turn those into duplicates.
func TestRegions_TwoRedis_NoDuplicate_MachineIDsInRange(t *testing.T) {
	modes := []node.Mode{node.ModeFlake, node.ModeFlake, node.ModeCounter, node.ModeAuto}
	var nodes []*node.Node
	var layouts []flake.Layout
	for region := range 2 {
		l, err := flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: region}.Layout()
		if err != nil {
			t.Fatal(err)
		}
		srv := realRedis(t)
		for _, mode := range modes {
			nodes = append(nodes, newNode(t, node.Options{Redis: client(t, srv), Mode: mode, MachineIDs: 1,
				Registry: coord.Options{Layout: l}}))
			layouts = append(layouts, l)
		}
	}
	deadline := time.Now().Add(2500 * time.Millisecond)
	got := eachNode(nodes, func(i int, n *node.Node) []uint64 {
		var ids []uint64
		buf := make([]uint64, 100)
		for time.Now().Before(deadline) {
			if _, err := n.NextIDs(ctxT(t), buf); err != nil {
				t.Error(err)
				return nil
			}
			ids = append(ids, buf...)
		}
		return ids
	})
	if t.Failed() {
		return
	}
	var all []uint64
	counterPairs := [2]map[[2]int64]bool{{}, {}}
	for i, ids := range got {
		l, mode := layouts[i], modes[i%4]
		idtest.Increasing(t, l, fmt.Sprintf("region %d node %d (%s)", l.Region, i%4, mode), ids)
		for _, id := range ids {
			p := l.Decompose(id)
			if p.Region != l.Region || p.MachineID < l.MinMachineID() || p.MachineID > l.CounterMachineID() {
				t.Fatalf("region %d node %d issued ID %d with machine ID %d (region %d): outside %d..%d",
					l.Region, i%4, id, p.MachineID, p.Region, l.MinMachineID(), l.CounterMachineID())
			}
			if p.MachineID == l.CounterMachineID() {
				counterPairs[l.Region][[2]int64{p.Tick, int64(p.Sequence)}] = true
			} else if mode == node.ModeCounter {
				t.Fatalf("counter node of region %d issued machine ID %d", l.Region, p.MachineID)
			}
		}
		all = append(all, ids...)
	}
	idtest.Unique(t, layouts[0], all)
	shared := 0
	for pair := range counterPairs[0] {
		if counterPairs[1][pair] {
			shared++
		}
	}
	if shared == 0 {
		t.Fatalf("the two regions' counters never handed out the same (tick, sequence): the test would not catch a shared counter machine ID")
	}
	t.Logf("%d IDs unique; the two counters handed out %d and %d IDs, %d of them the same (tick, sequence), told apart by machine IDs %d and %d",
		len(all), len(counterPairs[0]), len(counterPairs[1]), shared, layouts[0].CounterMachineID(), layouts[4].CounterMachineID())
}

// A node whose region, or region bits, differ from the region its Redis
// holds is refused at start, naming both layouts, in every mode: flake
// and auto by their claim, counter by its first segment (counter.lua),
// which New waits for. It never issues an ID.
func TestRegions_OtherRegionRefused(t *testing.T) {
	srv := realRedis(t)
	l0, _ := flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 0}.Layout()
	newNode(t, node.Options{Redis: client(t, srv), Registry: coord.Options{Layout: l0}})
	for _, s := range []flake.Settings{{BitsMachineID: 4, BitsRegion: 1, Region: 1}, {BitsMachineID: 4, BitsRegion: 2}} {
		l, _ := s.Layout()
		for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
			n, err := node.New(ctxT(t), node.Options{Redis: client(t, srv), Mode: mode, Registry: coord.Options{Layout: l, MaxWait: time.Second}})
			if err == nil {
				id, err := n.NextID(ctxT(t))
				n.Close(ctxT(t))
				t.Fatalf("%s node of %v on region 0's Redis: started; NextID = %d, %v", mode, l, id, err)
			}
			if !errors.Is(err, coord.ErrLayoutMismatch) && !errors.Is(err, fallback.ErrLayoutMismatch) {
				t.Errorf("%s node of %v: %v; want a layout mismatch", mode, l, err)
			}
			if msg := err.Error(); !strings.Contains(msg, l0.String()) || !strings.Contains(msg, l.String()) {
				t.Errorf("%s node of %v: %v; want both layouts named", mode, l, err)
			}
		}
	}
}
