package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/internal/redisinfo"
)

// doctorTimeout bounds one run of the checks.
const doctorTimeout = 20 * time.Second

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
			ctx, cancel := context.WithTimeout(c.Context, doctorTimeout)
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

// checkRedis runs flaked doctor's checks before a node starts: an unsafe
// result refuses the start, naming each with its fix; costly ones are
// logged at warn.
func checkRedis(ctx context.Context, t doctor.Target, log zerolog.Logger) error {
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	err := t.Redis.Time(pctx).Err() // TIME: the node's user may (PING it may not)
	pcancel()
	if err != nil {
		// Redis away is the node's to handle (auto mode, retries); the
		// scripts refuse unsafe writes whenever it comes back, and the
		// watch reports them.
		log.Warn().Err(err).Msg("cannot check the fleet's Redis now (flaked doctor's checks): unreachable; checking again while serving")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	rs := doctor.Run(ctx, t)
	var unsafe []string
	for _, r := range rs {
		switch r.Status {
		case doctor.Unsafe:
			unsafe = append(unsafe, fmt.Sprintf("%s: %s (fix: %s)", r.Check, r.Detail, r.Fix))
		case doctor.Costly:
			log.Warn().Str("check", r.Check).Str("server", r.Server).Str("fix", r.Fix).Msg(r.Detail)
		}
	}
	if len(unsafe) > 0 {
		msg := strings.Join(unsafe, "; ")
		if redisinfo.HasNoPerm(msg) {
			msg += " (" + redisinfo.ACLHint + ")"
		}
		return fmt.Errorf("the fleet's Redis is unsafe for flaked (flaked doctor --redis URL says more): %s", msg)
	}
	return nil
}
