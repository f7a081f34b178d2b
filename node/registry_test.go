package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
)

// Fault: a node started on a namespace flaked init never made (a new
// fleet nobody initialised, a wrong --namespace, or a Redis that lost
// everything before this node ever ran under it) cannot tell a new fleet
// from a lost one, nor whether its layout is the fleet's. Guard: every
// mode fails its start with the NOREGISTRY text naming flaked init (flake
// mode: the claim; counter mode: CheckLayout), writing no registry, and
// auto mode does not fall back to counter mode on it (the counter could
// not tell either). A duplicate would start with a node that started
// here: it would store its own layout, or issue counter IDs under a
// registry made by nobody.
func TestNode_NoRegistry_FailsAtStartInEveryMode(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
		t.Run(mode.String(), func(t *testing.T) {
			n, err := node.New(ctxT(t), node.Options{Redis: rdb, Mode: mode, Registry: coord.Options{MaxWait: time.Second}})
			if err == nil {
				id, err := n.NextID(ctxT(t))
				n.Close(context.Background())
				t.Fatalf("%s node on a namespace without a registry started (mode %s); NextID = %d, %v", mode, n.Mode(), id, err)
			}
			if !errors.Is(err, coord.ErrNoRegistry) || !strings.Contains(err.Error(), "NOREGISTRY") || !strings.Contains(err.Error(), "flaked init") {
				t.Fatalf("%s node: %v; want ErrNoRegistry with the NOREGISTRY text naming flaked init", mode, err)
			}
			for _, key := range []string{"{flaked}:meta", "{flaked}:layout", "{flaked}:counter", "{flaked}:reserved"} {
				if n := rdb.Exists(ctxT(t), key).Val(); n != 0 {
					t.Fatalf("%s node's failed start wrote %s", mode, key)
				}
			}
		})
	}
}

// Fault: Redis lost everything (FLUSHALL, a restart without persistence)
// under running nodes. Guard: a node that ran under the registry restores
// it (flake mode: its renewal and its claim again, at the loss floor;
// counter mode: its counter, which has had segments) and issues on,
// above everything issued before the loss. A duplicate shows as an ID
// issued twice, or as a node's IDs not strictly increasing across the
// loss.
func TestNode_RunningAfterFlushAll_RestoresRegistryAndIssuesOn(t *testing.T) {
	for _, mode := range []node.Mode{node.ModeFlake, node.ModeCounter, node.ModeAuto} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := realRedis(t)
			rdb := client(t, srv)
			l, _ := flake.Settings{BitsMachineID: 8}.Layout()
			n := newNode(t, fast(node.Options{Redis: rdb, Mode: mode, Registry: coord.Options{Layout: l}}))
			ids := issue(t, n, 3000)
			if err := rdb.FlushAll(ctxT(t)).Err(); err != nil {
				t.Fatal(err)
			}
			// Issued on until the node restored the registry (flake
			// mode: at its next reservation or renewal), then 3000 more:
			// in flake mode above the loss floor (about 4 s ahead), which
			// Redis grants past a second after the loss.
			deadline := time.Now().Add(20 * time.Second)
			want := -1
			for want < 0 || len(ids) < want {
				if time.Now().After(deadline) {
					t.Fatalf("%s node after FLUSHALL: %d IDs, registry restored: %v", mode, len(ids), want >= 0)
				}
				if want < 0 && len(ids)%100 == 0 && rdb.Exists(ctxT(t), "{flaked}:layout").Val() == 1 {
					want = len(ids) + 3000
				}
				ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
				id, err := n.NextID(ctx)
				cancel()
				if err != nil {
					if errors.Is(err, coord.ErrNoRegistry) || errors.Is(err, fallback.ErrNoRegistry) || time.Now().After(deadline) {
						t.Fatalf("%s node after FLUSHALL: %v", mode, err)
					}
					continue
				}
				ids = append(ids, id)
			}
			idtest.Increasing(t, l, fmt.Sprint(mode, " node"), ids)
			idtest.Unique(t, l, ids)
			if got := rdb.Get(ctxT(t), "{flaked}:layout").Val(); got != l.String() {
				t.Fatalf("fleet layout after the loss = %q, want %q restored", got, l.String())
			}
			if g := rdb.HGet(ctxT(t), "{flaked}:meta", "generation").Val(); g == "" {
				t.Fatal("{flaked}:meta not restored")
			}
		})
	}
}

// Fault: a running node in counter mode that never ran under the registry
// (auto mode started while Redis was away) finds Redis answering without
// one. Guard: it issues nothing; a caller waits within --id-wait (a node
// of the fleet, or flaked init, may make it meanwhile) and then gets an
// error naming flaked init, and the node issues once the registry is
// there. A duplicate would start with an ID issued, or a registry key
// written, before flaked init ran.
func TestNode_NoRegistryWhileRunning_WaitsWithinIDWaitNamingInit(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	srv.Pause()
	o := fast(node.Options{Redis: rdb, Mode: node.ModeAuto, IDWait: 300 * time.Millisecond})
	n, err := node.New(ctxT(t), o)
	if err != nil {
		srv.Resume()
		t.Fatalf("auto node with Redis away: %v", err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	srv.Resume()
	// The first calls may end at --id-wait before the counter's first
	// fetch since Redis came back has its answer; from then on every call
	// names the missing registry.
	named := func(err error) bool {
		return (errors.Is(err, fallback.ErrNoRegistry) || errors.Is(err, coord.ErrNoRegistry)) &&
			strings.Contains(err.Error(), "--id-wait") && strings.Contains(err.Error(), "flaked init")
	}
	var last error
	poll.Until(t, 10*time.Second, "NextID to fail naming the missing registry", func() bool {
		id, err := n.NextID(ctxT(t))
		if err == nil {
			t.Fatalf("NextID without a registry = %d", id)
		}
		last = err
		return named(err)
	})
	if id, err := n.NextID(ctxT(t)); err == nil || !named(err) {
		t.Fatalf("NextID without a registry: %d, %v (before: %v); want ErrNoRegistry after --id-wait, naming flaked init", id, err, last)
	}
	for _, key := range []string{"{flaked}:meta", "{flaked}:layout", "{flaked}:counter", "{flaked}:reserved"} {
		if rdb.Exists(ctxT(t), key).Val() != 0 {
			t.Fatalf("the node wrote %s without a registry", key)
		}
	}
	initRegistry(t, o) // flaked init
	var ids []uint64
	deadline := time.Now().Add(15 * time.Second)
	for len(ids) < 2000 {
		id, err := n.NextID(ctxT(t))
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("after flaked init: %v", err)
			}
			continue
		}
		ids = append(ids, id)
	}
	idtest.Increasing(t, n.Layout(), "node", ids)
}

// Fault: auto mode falls back to counter mode at start for a reason of
// its own (here a clock an hour off Redis TIME), on a namespace flaked
// init never made, or one whose fleet runs another layout. Guard: the
// fallback runs counter mode's start check, so the start fails (naming
// flaked init, or both layouts) as a counter-mode start does, rather than
// a node running that is refused only at its first segment. A duplicate
// would need such a node to issue; this pins that it does not even start.
// Found by the simulator (seed 26890: a stray started in counter mode).
func TestNode_AutoFallbackAtStart_ChecksRegistryAndLayout(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	clk := clock.NewOffset(-time.Hour)
	o := node.Options{Redis: rdb, Mode: node.ModeAuto, Clock: clk}
	if n, err := node.New(ctxT(t), o); !errors.Is(err, coord.ErrNoRegistry) {
		if err == nil {
			n.Close(context.Background())
		}
		t.Fatalf("auto node falling back on a namespace without a registry: %v, want ErrNoRegistry", err)
	}
	initRegistry(t, node.Options{Redis: rdb}) // the fleet's default layout
	other, err := flake.NewLayout(10, 14, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	o.Registry.Layout = other
	if n, err := node.New(ctxT(t), o); !errors.Is(err, fallback.ErrLayoutMismatch) {
		if err == nil {
			n.Close(context.Background())
		}
		t.Fatalf("auto node with another layout falling back: %v, want ErrLayoutMismatch", err)
	}
}
