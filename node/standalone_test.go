package node_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
)

// standaloneRun starts a standalone node on clk, takes n IDs, checks the
// embedded store's TIME against the node's clock, and stops cleanly.
func standaloneRun(t *testing.T, stateFile string, clk clock.Clock, n int) []uint64 {
	t.Helper()
	nd, err := node.New(ctxT(t), node.Options{StateFile: stateFile, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close(context.Background())
	if l := nd.Lease(); l == nil || l.DataLoss {
		// The embedded store is new at every start: not a loss of Redis.
		t.Fatalf("lease %+v: want one, without a data loss", l)
	}
	ids := issue(t, nd, n)
	st, err := nd.StoreTime(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	// The node may run ahead of clock (its state file's reservation), so
	// compare with the generator's view: its newest ID's time.
	last := nd.Layout().Decompose(ids[len(ids)-1]).Time
	if d := st.Sub(last); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("embedded store TIME %v is %v off the node's clock (its last ID at %v)", st, d, last)
	}
	if err := nd.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A standalone node restarted with its clock set back a minute (further
// than max wait) starts, and every ID after the restart is above every ID
// before it: the embedded store's TIME follows the node's clock (on the
// host's clock the clock guard would refuse the start: skew against the
// store), and the node runs from the state file's reservation on. Without a state file the
// same restart issues below the first run, which is what the default state
// file of flaked serve is for.
func TestStandalone_RestartClockSetBack_AboveEverythingBefore(t *testing.T) {
	for _, back := range []time.Duration{-time.Minute, -time.Hour} {
		t.Run(back.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "node.state")
			before := standaloneRun(t, path, nil, 3000)
			after := standaloneRun(t, path, clock.NewOffset(back), 3000)
			top := slices.Max(before)
			for _, id := range after {
				if id <= top {
					t.Fatalf("ID %d after the restart is not above %d, the highest before it", id, top)
				}
			}
			idtest.Increasing(t, flake.DefaultLayout(), "node", append(before, after...))
		})
	}
	t.Run("no state file: below", func(t *testing.T) {
		before := standaloneRun(t, "", nil, 100)
		after := standaloneRun(t, "", clock.NewOffset(-time.Minute), 100)
		if slices.Min(after) > slices.Max(before) {
			t.Fatal("without a state file the restart with the clock set back issued above the first run: this test cannot tell")
		}
	})
}
