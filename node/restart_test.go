package node_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
)

// Fault: kill -9 of a node that has been issuing (Crash: nothing
// released), restarted at once on its state file, with the default reach
// (max lead 1 s, reserve ahead DefaultReserveAhead). Guard: the restart
// takes its lease over above the reservation the crashed process made
// ahead (Redis's and the state file's). With reserve-ahead no more than
// max lead that reservation is at most about one lead ahead of the clock,
// so the restart's generator can issue at once instead of waiting for the
// clock (issue 28: 2 s before). A duplicate shows as an ID of the restart
// at or below one of the crashed process (same machine ID), or a floor
// below what it reserved.
func TestNode_KillAndRestart_DefaultReach_AboveReservationAtOnce(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	path := filepath.Join(t.TempDir(), "node.state")
	o := node.Options{Redis: rdb, StateFile: path}
	if node.DefaultReserveAhead > flake.DefaultMaxLead {
		t.Fatalf("default reserve ahead %v is past the default max lead %v: a restart after kill -9 waits for the clock",
			node.DefaultReserveAhead, flake.DefaultMaxLead)
	}
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
	lead := int64(flake.DefaultMaxLead / lay.TimeUnit)
	if ahead := floor - lay.Tick(time.Now()); ahead > lead+1 {
		t.Fatalf("the restart's floor is %d ticks ahead of the clock, more than max lead (%d): its callers wait", ahead, lead)
	}
	after := issue(t, n2, 1000)
	idtest.Increasing(t, lay, "node", append(before, after...))
}

// Fault: kill -9 of an auto-mode node, restarted at once on its state
// file, with its reservation far ahead of the clock (reserve ahead 3 s,
// past max lead 1 s). Guard: the restart
// takes its lease over above that reservation, and rather than make
// callers wait for the clock it serves counter IDs until the clock nears
// the lease's floor, then returns to flake mode. A duplicate shows as an
// ID of the restart equal to one of the crashed process, or a step back
// in the restart's IDs across its switch; a wait, as a start in flake
// mode.
func TestAuto_KillAndRestart_LeaseAheadOfClock_CounterUntilItStarts(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	path := filepath.Join(t.TempDir(), "node.state")
	reg := coord.Options{MaxSkew: 10 * time.Second}
	o := fast(node.Options{Redis: rdb, Registry: reg, StateFile: path, Mode: node.ModeAuto, ReserveAhead: 3 * time.Second})
	initRegistry(t, o)
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	before := issue(t, n, 5000)
	lay := n.Layout()
	granted := n.Lease().Granted()
	n.Crash()

	clk := flake.NewOffsetClock(0)
	o.Clock = clk
	n2 := newNode(t, o)
	floor := n2.Lease().Floor()
	if floor < granted {
		t.Fatalf("the restart's lease starts after tick %d, below the %d the crashed process had reserved", floor, granted)
	}
	ahead := time.Duration(floor-lay.Tick(time.Now())) * lay.TimeUnit
	if ahead <= flake.DefaultMaxLead {
		t.Fatalf("the restart's lease starts %v ahead of the clock, not past max lead: the test shows nothing", ahead)
	}
	if n2.Mode() != node.ModeCounter {
		t.Fatalf("restarted with its lease %v ahead of the clock: mode %s, want counter (flake mode would make callers wait)", ahead, n2.Mode())
	}
	is := startIssuer(n2)
	poll.Until(t, 5*time.Second, "counter IDs", func() bool { return is.count() > 500 })
	clk.Set(ahead) // at the lease's floor, within max skew (10 s)
	poll.Until(t, 10*time.Second, "the return to flake mode", func() bool { return n2.Mode() == node.ModeFlake })
	after := is.count()
	poll.Until(t, 5*time.Second, "flake IDs", func() bool { return is.count() > after+500 })
	is.halt()

	idtest.Increasing(t, lay, "the restart", is.ids)
	idtest.Unique(t, lay, append(slices.Clone(before), is.ids...))
	if is.modes[0] != node.ModeCounter || is.modes[len(is.modes)-1] != node.ModeFlake {
		t.Fatalf("modes seen: %v", is.modes)
	}
}
