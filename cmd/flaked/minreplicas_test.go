package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/daemon"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/internal/redistest"
)

// serveOptionsT parses serve's flags as flaked serve does.
func serveOptionsT(t *testing.T, args ...string) daemon.Options {
	t.Helper()
	var got daemon.Options
	cmd := &cli.Command{Name: "serve", Flags: serveFlags(), Action: func(c *cli.Context) error {
		var err error
		got, err = serveOptionsFromFlags(c, zerolog.Nop())
		return err
	}}
	if err := testApp(cmd).Run(append([]string{"flaked", "serve", "--listen", "127.0.0.1:0"}, args...)); err != nil {
		t.Fatal(err)
	}
	if got.Node.Redis != nil {
		t.Cleanup(func() { _ = got.Node.Redis.Close() })
	}
	return got
}

// A fleet reaching Redis through Sentinel takes its Sentinels from the URL:
// a grant made while every Sentinel reports the master up needs no
// replica, so a master whose replicas are gone still grants. When the
// Sentinels do not vouch (here: a registry given none), --min-replicas
// unset requires every grant on one replica, so a master whose replicas
// are gone (or cut off: a split brain whose mark was made at 0,
// docs/model.md) grants nothing: claims and counter segments are refused,
// naming the flag. An explicit --min-replicas 0 wins; a plain redis:// URL
// defaults to 0. Fault: the model's split-brain trails, a mark of 0 on a
// master Sentinel may replace.
func TestMinReplicas_SentinelDefault_RefusesWithoutReplica(t *testing.T) {
	redistest.Require(t, "redis-server", "redis-sentinel")
	s := redistest.StartSentinel(t)
	s.Replica().Kill() // the master lists no replica: a fresh registry's mark is 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := "redis-sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName()

	o := serveOptionsT(t, "--redis", url, "--replica-wait", "50ms", "--namespace", "sentinel-default")
	if got := o.Node.Registry.MinReplicas; got != coord.SentinelMinReplicas {
		t.Fatalf("--min-replicas unset with Sentinel: %d, want %d", got, coord.SentinelMinReplicas)
	}
	if o.Node.Registry.Sentinels == nil {
		t.Fatal("a redis-sentinel:// URL gave the registry no Sentinels")
	}
	t.Cleanup(func() { _ = o.Node.Registry.Sentinels.(*coord.SentinelSet).Close() })
	vouched, err := coord.NewRegistry(o.Node.Redis, forgetLoss(t, o))
	if err != nil {
		t.Fatal(err)
	}
	// The Sentinel's down-after is 1 s and it PINGs once a second: a claim
	// whose check finds its last reply nearly 1 s old is refused and tried
	// again (coord's replicaPatience).
	if _, err := vouched.Claim(ctx, coord.ClaimOptions{}); err != nil || vouched.ReplicaStatus().Via != "sentinels" {
		t.Fatalf("claim through Sentinel with no replica: %v %+v, want vouched for by the Sentinel", err, vouched.ReplicaStatus())
	}
	ro := forgetLoss(t, o)
	ro.Sentinels = nil
	reg, err := coord.NewRegistry(o.Node.Redis, ro)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.Claim(ctx, coord.ClaimOptions{})
	if !errors.Is(err, coord.ErrNotReplicated) || !strings.Contains(err.Error(), "--min-replicas is 1") {
		t.Fatalf("claim through Sentinel with no replica: %v, want ErrNotReplicated naming --min-replicas", err)
	}
	counter, err := fallback.New(o.Node.Redis, fallback.Options{Namespace: "sentinel-default", ReplicaWait: 50 * time.Millisecond,
		MinReplicas: o.Node.Registry.MinReplicas, MinSegment: 10, MaxSegment: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer ccancel()
	if id, err := counter.NextID(cctx); err == nil {
		t.Fatalf("counter through Sentinel with no replica issued %d", id)
	}

	o0 := serveOptionsT(t, "--redis", url, "--replica-wait", "50ms", "--namespace", "sentinel-zero", "--min-replicas", "0")
	if got := o0.Node.Registry.MinReplicas; got != 0 {
		t.Fatalf("--min-replicas 0 with Sentinel: %d", got)
	}
	reg0, err := coord.NewRegistry(o0.Node.Redis, forgetLoss(t, o0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg0.Claim(ctx, coord.ClaimOptions{}); err != nil {
		t.Fatalf("claim with an explicit --min-replicas 0: %v", err)
	}
	if got := serveOptionsT(t, "--redis", s.Master().URL()).Node.Registry.MinReplicas; got != 0 {
		t.Fatalf("--min-replicas unset with redis://: %d, want 0", got)
	}
}

// forgetLoss makes o's registry as a new fleet's with no loss floor
// (redistest.InitRegistry), so a claim does not wait one out.
func forgetLoss(t *testing.T, o daemon.Options) coord.Options {
	t.Helper()
	ro := o.Node.Registry
	ro.Horizon = coord.DefaultHorizon
	if err := redistest.InitRegistry(context.Background(), o.Node.Redis, ro.Namespace, ro.Layout.String()); err != nil {
		t.Fatal(err)
	}
	return ro
}
