package node_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
)

// Fault: kill -9 of a node that has been issuing (Crash: nothing
// released), restarted at once on its state file, with the default reach
// (max lead 1 s, reserve ahead DefaultReserveAhead, 12 s). Guard: the
// restart takes its lease over above the reservation the crashed process
// made ahead (Redis's and the state file's), 11-12 s ahead of the clock,
// and its generator issues at once from there, since Redis made that
// reservation under its cap and so grants past it at once. A duplicate
// shows as an ID of the restart at or below one of the crashed process
// (same machine ID), or a floor below what it reserved; a wait for the
// clock, as NextID failing within 500 ms.
func TestNode_KillAndRestart_DefaultReach_AboveReservationAtOnce(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	path := filepath.Join(t.TempDir(), "node.state")
	o := node.Options{Redis: rdb, StateFile: path}
	initRegistry(t, o)
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	var before []uint64
	for range 40 { // a steady load for about 2 s: several reservations
		before = append(before, issue(t, n, 50)...)
		time.Sleep(50 * time.Millisecond)
	}
	granted := n.Lease().Granted()
	mids := n.MachineIDs()
	n.Crash()

	n2, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close(context.Background())
	lay := n2.Layout()
	if got := n2.MachineIDs(); len(got) != 1 || got[0] != mids[0] {
		t.Fatalf("the restart took machine IDs %v, want its own %v back", got, mids)
	}
	floor := n2.Lease().Floor()
	if floor < granted {
		t.Fatalf("the restart starts after tick %d, below the %d the crashed process had reserved", floor, granted)
	}
	if ahead := time.Duration(floor-lay.Tick(time.Now())) * lay.TimeUnit; ahead <= flake.DefaultMaxLead {
		t.Fatalf("the restart's floor is %v ahead of the clock, not past max lead: the test shows nothing", ahead)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	after := make([]uint64, 1000)
	if _, err := n2.NextIDs(ctx, after); err != nil {
		t.Fatalf("the restart, its floor past max lead: %v; want IDs at once", err)
	}
	idtest.Increasing(t, lay, "node", append(before, after...))
}

// Fault: kill -9 of an auto-mode node, restarted at once on its state
// file, with its reservation far ahead of the clock (reserve ahead 3 s,
// past max lead 1 s). Guard: the restart takes its lease over above that
// reservation, which Redis made under its cap (its TIME + the horizon),
// so Redis grants past it at once: the restart issues in flake mode at
// once, ahead of its clock, instead of waiting for the clock or serving
// counter IDs meanwhile. A duplicate shows as an ID of the restart equal
// to one of the crashed process, at or below the floor, or a step back.
func TestAuto_KillAndRestart_LeaseAheadOfClock_IssuesAheadAtOnce(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	path := filepath.Join(t.TempDir(), "node.state")
	o := fast(node.Options{Redis: rdb, StateFile: path, Mode: node.ModeAuto, ReserveAhead: 3 * time.Second})
	initRegistry(t, o)
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	before := issue(t, n, 5000)
	lay := n.Layout()
	granted := n.Lease().Granted()
	n.Crash()

	n2 := newNode(t, o)
	floor := n2.Lease().Floor()
	if floor < granted {
		t.Fatalf("the restart's lease starts after tick %d, below the %d the crashed process had reserved", floor, granted)
	}
	ahead := time.Duration(floor-lay.Tick(time.Now())) * lay.TimeUnit
	if ahead <= flake.DefaultMaxLead {
		t.Fatalf("the restart's lease starts %v ahead of the clock, not past max lead: the test shows nothing", ahead)
	}
	if n2.Mode() != node.ModeFlake {
		t.Fatalf("restarted with its lease %v ahead of the clock: mode %s, want flake at once", ahead, n2.Mode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	after := make([]uint64, 5000)
	if _, err := n2.NextIDs(ctx, after); err != nil {
		t.Fatalf("the restart, its lease %v ahead of the clock: %v; want IDs at once", ahead, err)
	}
	if tick := lay.Decompose(after[0]).Tick; tick <= floor {
		t.Fatalf("the restart's first ID at tick %d, at or below its floor %d", tick, floor)
	}
	idtest.Increasing(t, lay, "the restart", after)
	idtest.Unique(t, lay, append(slices.Clone(before), after...))
}
