package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

// initSlack bounds init's Redis calls beyond the skew it waits.
const initSlack = 10 * time.Second

// initCommand is flaked init: the only way a namespace gets a registry
// (coord.Init). A node that finds none and never ran under one is refused
// (NOREGISTRY), so a misconfigured node can never make the fleet's layout.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "make the registry of a fleet (its namespace and layout): the only way a namespace gets one",
		Description: "flaked serve starts only on a namespace with a registry: run flaked init once, with the fleet's\n" +
			"layout flags, before the fleet's first node. It cannot tell a new namespace from one whose Redis\n" +
			"lost everything a moment ago while nodes still issue, so it records a possible loss now, which\n" +
			"claims start above (the horizon of a node with these --max-lead, --reserve-ahead and --max-skew,\n" +
			"plus 1 s of skew), and waits until Redis grants past it (the skew, 1 s) before it returns: the\n" +
			"first IDs then come at once, ahead of the clock, and an init run after a total loss of Redis's\n" +
			"data is safe too. It refuses (status 1) a namespace that holds a registry or a\n" +
			"layout; --if-missing makes that a success (status 2 if the stored layout differs from the flags'),\n" +
			"for deploy steps run at every start (a one-shot Compose service, an init container). After Redis lost\n" +
			"its data, running nodes restore the registry themselves: no init is needed.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "redis", EnvVars: envVars("redis"), Required: true,
				Usage: "the fleet's Redis URL: redis://, rediss://, redis-sentinel://host:port[,..]/<master>, redis-cluster://host:port[,..]"},
			&cli.StringFlag{Name: "namespace", Value: coord.DefaultNamespace, EnvVars: envVars("namespace"),
				Usage: "the fleet's namespace (keys {ns}:...)"},
			durationFlag("max-lead", flake.DefaultMaxLead, 0, node.MaxMaxLead, "the nodes' --max-lead (sets the fleet's horizon)"),
			durationFlag("reserve-ahead", node.DefaultReserveAhead, node.MinReserveAhead, node.MaxReserveAhead, "the nodes' --reserve-ahead (sets the fleet's horizon)"),
			durationFlag("max-skew", coord.DefaultMaxSkew, coord.MinMaxSkew, coord.MaxMaxSkew, "the nodes' --max-skew (sets the fleet's horizon)"),
			&cli.StringFlag{Name: "redis-identity", Value: contract.IdentityInfo, EnvVars: envVars("redis-identity"),
				Usage: "the nodes' --redis-identity"},
			&cli.BoolFlag{Name: "if-missing", EnvVars: envVars("if-missing"),
				Usage: "succeed without a change when the namespace holds a registry (a deploy step run at every start)"},
		}, layoutFlags()...),
		Action: runInit,
	}
}

func runInit(c *cli.Context) error {
	layout, err := layoutFromFlags(c)
	if err != nil {
		return err
	}
	ns := c.String("namespace")
	if err := checkNamespace(ns); err != nil {
		return err
	}
	if err := contract.CheckIdentity(c.String("redis-identity")); err != nil {
		return usagef("--redis-identity: %v", err)
	}
	o := coord.Options{Namespace: ns, Layout: layout, MaxSkew: c.Duration("max-skew"), RedisIdentity: c.String("redis-identity")}
	// The horizon a flaked serve node with these flags claims under: the
	// fleet's, which caps every grant, so that Redis grants past its loss
	// floor when init returns.
	if o.Horizon, err = (node.Options{Registry: o, MaxLead: c.Duration("max-lead"), ReserveAhead: c.Duration("reserve-ahead")}).Horizon(); err != nil {
		return usageError{err}
	}
	rdb, err := redisClient(c.String("redis"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(c.Context, o.Horizon+contract.RedisSkew+initSlack)
	defer cancel()
	start := time.Now()
	gen, err := coord.Init(ctx, rdb, o)
	if errors.Is(err, coord.ErrRegistryExists) && c.Bool("if-missing") {
		// Run at every start of a deployment: a layout changed in its
		// flags is caught here, before the nodes are refused one by one.
		stored, gerr := rdb.Get(ctx, contract.NewKeys(ns).Layout).Result()
		if gerr == nil && stored != layout.String() {
			return usagef("--if-missing: namespace %s holds layout %s, the flags give %s: start the fleet with the stored layout's flags (flaked parse shows them)",
				ns, stored, layout)
		}
		fmt.Fprintf(c.App.Writer, "namespace %s has a registry already (--if-missing): nothing done: %v\n", ns, err)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "registry of namespace %s made: generation %s, layout %s; Redis grants past its possible loss after %.1fs, the first IDs come at once\n",
		ns, gen, layout, time.Since(start).Seconds())
	return nil
}
