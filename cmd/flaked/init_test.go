package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// flaked init makes the registry once and refuses a second time (status
// 1, naming why), so it cannot reset the loss floors of a fleet that has
// issued IDs; --if-missing makes the refusal a success and changes
// nothing, unless its layout flags differ from the stored layout; bad flags are usage errors (status 2). Fault covered: init
// returning before Redis grants past the possible loss it records, which
// would make the first ID of a default flaked serve node wait (or, were
// the floor ignored, issue below grants made before a total loss): the
// first ID right after it must come at once, above its floor.
func TestInit_FirstIDAtOnce_OnceThenRefused(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	layoutFlags := []string{"--bits-id", "53", "--bits-machine", "12"}
	code, out, errOut := runT(t, nil, append([]string{"init", "--redis", srv.URL()}, layoutFlags...)...)
	if code != exitOK || !strings.Contains(out, "registry of namespace flaked made") || !strings.Contains(out, "come at once") {
		t.Fatalf("init: status %d, %q, %q", code, out, errOut)
	}

	// A claim as a default flaked serve node of this layout makes it.
	layout, err := flake.Settings{BitsID: 53, BitsMachineID: 12}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client(t)
	requireFirstIDAtOnce(t, rdb, node.Options{Registry: coord.Options{Layout: layout}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	code, out, errOut = runT(t, nil, append([]string{"init", "--redis", srv.URL()}, layoutFlags...)...)
	if code != exitFailure || !strings.Contains(errOut, "registry exists") || !strings.Contains(errOut, "restored by its nodes") {
		t.Fatalf("a second init: status %d, %q, %q; want 1 and registry exists", code, out, errOut)
	}
	gen, err := rdb.HGet(ctx, "{flaked}:meta", "generation").Result()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runT(t, nil, append([]string{"init", "--redis", srv.URL(), "--if-missing"}, layoutFlags...)...)
	if code != exitOK || !strings.Contains(out, "nothing done") {
		t.Fatalf("init --if-missing on a registry: status %d, %q, %q; want 0 and nothing done", code, out, errOut)
	}
	if after, err := rdb.HGet(ctx, "{flaked}:meta", "generation").Result(); err != nil || after != gen {
		t.Fatalf("init --if-missing changed the generation %q to %q (%v)", gen, after, err)
	}
	code, _, errOut = runT(t, nil, "init", "--redis", srv.URL(), "--if-missing", "--bits-machine", "10")
	if code != exitUsage || !strings.Contains(errOut, "holds layout") {
		t.Fatalf("init --if-missing with another layout: status %d, %q; want %d naming the stored layout", code, errOut, exitUsage)
	}
	for _, bad := range [][]string{{"--bits-id", "99"}, {"--namespace", "a b"}, {"--max-lead", "2h"}, {"--reserve-ahead", "5ms"}, {"--redis-identity", "maybe"}} {
		if code, _, errOut := runT(t, nil, append([]string{"init", "--redis", srv.URL()}, bad...)...); code != exitUsage {
			t.Errorf("init %v: status %d (%s), want %d", bad, code, errOut, exitUsage)
		}
	}
}

// flaked init --reserve-ahead makes the fleet horizon, which caps every
// grant, as long as the nodes' that pass the same flag: the first claim of
// such a node right after init is granted past its floor at once, and its
// first ID comes at once. With init's default (1 s) the cap would reach
// that node's loss floor (3 s of reach) only 2 s later.
func TestInit_ReserveAhead_FirstIDAtOnce(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	code, out, errOut := runT(t, nil, "init", "--redis", srv.URL(), "--namespace", "long", "--reserve-ahead", "3s")
	if code != exitOK {
		t.Fatalf("init: status %d, %q, %q", code, out, errOut)
	}
	requireFirstIDAtOnce(t, srv.Client(t), node.Options{
		Registry: coord.Options{Namespace: "long", Layout: flake.DefaultLayout()}, ReserveAhead: 3 * time.Second})
}

// requireFirstIDAtOnce starts a flake node with opts on rdb and fails the
// test unless its first ID comes within 200 ms, above its lease's floor:
// init waited until Redis grants past the loss it recorded for such a
// node (its generator starts at that floor, ahead of the clock).
func requireFirstIDAtOnce(t *testing.T, rdb redis.UniversalClient, opts node.Options) {
	t.Helper()
	opts.Redis = rdb
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.New(ctx, opts)
	if err != nil {
		t.Fatalf("the first node after init: %v", err)
	}
	defer n.Close(context.Background())
	first, cancelFirst := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelFirst()
	id, err := n.NextID(first)
	if err != nil {
		t.Fatalf("the first ID after init: %v; want it at once", err)
	}
	if tick, floor := n.Layout().Decompose(id).Tick, n.Lease().Floor(); tick <= floor {
		t.Fatalf("the first ID after init has tick %d, at or below its lease's floor %d", tick, floor)
	}
	if !n.Ready() {
		t.Fatal("the first node after init issues at once but says it is not ready")
	}
}

// flaked serve on a namespace without a registry stops at start, with
// status 1 (an operator step missing, not bad flags: a supervisor's
// restart succeeds once flaked init ran, and systemd's
// RestartPreventExitStatus=2 must not stop it) and the NOREGISTRY text
// naming flaked init; in every mode (auto does not fall back to counter
// on it). Fault covered: a node making a registry of its own, with its own
// layout, on a namespace whose Redis lost everything.
func TestServe_NoRegistry_Exit1NamingInit(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	for _, mode := range []string{"flake", "counter", "auto"} {
		t.Run(mode, func(t *testing.T) {
			code, _, errOut := runT(t, nil, "serve", "--redis", srv.URL(), "--listen", redistest.FreeAddr(t), "--mode", mode,
				"--no-state-file", "--namespace", "fresh-"+mode)
			if code != exitFailure || !strings.Contains(errOut, "NOREGISTRY") || !strings.Contains(errOut, "flaked init") {
				t.Fatalf("serve --mode %s on a namespace without a registry: status %d, %q; want 1 naming NOREGISTRY and flaked init", mode, code, errOut)
			}
		})
	}
}
