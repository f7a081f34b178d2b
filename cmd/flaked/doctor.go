package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/doctor"
)

func doctorCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "redis", EnvVars: envVars("redis"), Required: true,
			Usage: "the fleet's Redis URL, as the nodes use it: redis://, rediss://, redis-sentinel://host:port[,..]/<master>, redis-cluster://host:port[,..]"},
		&cli.StringFlag{Name: "sentinel", EnvVars: envVars("sentinel"),
			Usage: "host:port[,host:port..]/<master> of the Sentinels to check (a redis-sentinel:// --redis gives them already)"},
		&cli.StringFlag{Name: "namespace", Value: coord.DefaultNamespace, EnvVars: envVars("namespace"),
			Usage: "the fleet's namespace (keys {ns}:...)"},
		durationFlag("lease-ttl", coord.DefaultLeaseTTL, coord.MinLeaseTTL, coord.MaxLeaseTTL, "the nodes' --lease-ttl"),
		durationFlag("max-skew", coord.DefaultMaxSkew, coord.MinMaxSkew, coord.MaxMaxSkew, "the nodes' --max-skew"),
		&cli.StringFlag{Name: "redis-identity", Value: "info", EnvVars: envVars("redis-identity"),
			Usage: "the nodes' --redis-identity (none: say what the opt-in loses instead of refusing)"},
		&cli.BoolFlag{Name: "json", EnvVars: envVars("json"), Usage: "print the results as JSON"},
		intFlag("min-replicas", 0, 0, coord.MaxMinReplicas, "the nodes' --min-replicas; "+minReplicasUsage),
	}
	return &cli.Command{
		Name:  "doctor",
		Usage: "check a live Redis deployment against what flaked's uniqueness assumes; exit 1 when anything is unsafe",
		Description: "Each check prints ok, costly (uniqueness holds at a cost, or the check cannot tell) or unsafe\n" +
			"(flaked serve refuses to start, or its scripts refuse to write), with the fix.",
		Flags: append(flags, layoutFlags()...),
		Action: func(c *cli.Context) error {
			layout, err := layoutFromFlags(c)
			if err != nil {
				return err
			}
			rdb, err := redisClient(c.String("redis"))
			if err != nil {
				return err
			}
			defer rdb.Close()
			t := doctor.Target{Redis: rdb, Namespace: c.String("namespace"), Layout: layout,
				LeaseTTL: c.Duration("lease-ttl"), MaxSkew: c.Duration("max-skew"), IdentityNone: c.String("redis-identity") == "none",
				MinReplicas: doctorMinReplicas(minReplicasFromFlags(c))}
			if err := sentinelTarget(&t, c.String("redis"), c.String("sentinel")); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, doctor.CheckTimeout)
			defer cancel()
			rs := doctor.Run(ctx, t)
			if c.Bool("json") {
				err = doctor.WriteJSON(c.App.Writer, rs)
			} else {
				err = doctor.WriteText(c.App.Writer, rs)
			}
			if err != nil {
				return err
			}
			if bad := doctor.UnsafeChecks(rs); len(bad) > 0 {
				return fmt.Errorf("unsafe: %s", strings.Join(bad, ", "))
			}
			return nil
		},
	}
}

// sentinelTarget sets t's Sentinels from --sentinel, or from a
// redis-sentinel:// (rediss-sentinel://) URL.
func sentinelTarget(t *doctor.Target, redisURL, flag string) error {
	spec := flag
	if spec == "" {
		scheme, rest, _ := strings.Cut(redisURL, "://")
		if !strings.HasSuffix(scheme, "-sentinel") {
			return nil
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		spec, _, _ = strings.Cut(rest, "?")
		if u, err := url.Parse(redisURL); err == nil {
			t.SentinelPassword = u.Query().Get("sentinel_password")
		}
	}
	hosts, master, ok := strings.Cut(spec, "/")
	if !ok || master == "" || hosts == "" {
		return usagef("--sentinel %q: want host:port[,host:port]/<master name>", spec)
	}
	t.Sentinels, t.MasterName = strings.Split(hosts, ","), master
	return nil
}
