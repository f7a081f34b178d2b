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
// returning before the possible loss it records is waited out, which
// would make the first claims of a default flaked serve node wait (or,
// were the floor ignored, issue below grants made before a total loss):
// a claim right after it must find its floor passed.
func TestInit_WaitsOutFloor_OnceThenRefused(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	layoutFlags := []string{"--bits-id", "53", "--bits-machine", "12"}
	code, out, errOut := runT(t, nil, append([]string{"init", "--redis", srv.URL()}, layoutFlags...)...)
	if code != exitOK || !strings.Contains(out, "registry of namespace flaked made") || !strings.Contains(out, "start at once") {
		t.Fatalf("init: status %d, %q, %q", code, out, errOut)
	}

	// A claim as a default flaked serve node of this layout makes it.
	layout, err := flake.Settings{BitsID: 53, BitsMachineID: 12}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client(t)
	requireFirstClaimAtOnce(t, rdb, node.Options{Registry: coord.Options{Layout: layout}})
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

// flaked init --reserve-ahead waits out the longer horizon of the nodes
// that pass the same flag: their first claim finds its floor passed. With
// init's default (1 s) it would not: the floor would be 2 s ahead.
func TestInit_ReserveAhead_WaitsOutTheNodesHorizon(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	code, out, errOut := runT(t, nil, "init", "--redis", srv.URL(), "--namespace", "long", "--reserve-ahead", "3s")
	if code != exitOK {
		t.Fatalf("init: status %d, %q, %q", code, out, errOut)
	}
	requireFirstClaimAtOnce(t, srv.Client(t), node.Options{
		Registry: coord.Options{Namespace: "long", Layout: flake.DefaultLayout()}, ReserveAhead: 3 * time.Second})
}

// requireFirstClaimAtOnce claims a machine ID as a node with opts would
// and fails the test unless its floor is below the Redis clock's tick:
// init waited out the loss it recorded for such a node.
func requireFirstClaimAtOnce(t *testing.T, rdb redis.UniversalClient, opts node.Options) {
	t.Helper()
	horizon, err := opts.Horizon()
	if err != nil {
		t.Fatal(err)
	}
	o := opts.Registry
	o.Horizon = horizon
	reg, err := coord.NewRegistry(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := reg.Claim(ctx, coord.ClaimOptions{})
	if err != nil {
		t.Fatalf("the first claim after init: %v", err)
	}
	defer lease.Release(context.Background(), -1)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if floor, tick := lease.Floor(), o.Layout.Tick(now); floor >= tick {
		t.Fatalf("the first claim after init (horizon %v) has floor %d, not below the Redis clock's tick %d: init did not wait out its loss", horizon, floor, tick)
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
			code, _, errOut := runT(t, nil, "serve", "--redis", srv.URL(), "--listen", freeAddr(t), "--mode", mode,
				"--no-state-file", "--namespace", "fresh-"+mode)
			if code != exitFailure || !strings.Contains(errOut, "NOREGISTRY") || !strings.Contains(errOut, "flaked init") {
				t.Fatalf("serve --mode %s on a namespace without a registry: status %d, %q; want 1 naming NOREGISTRY and flaked init", mode, code, errOut)
			}
		})
	}
}
