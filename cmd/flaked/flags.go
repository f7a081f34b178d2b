package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/redisurl"
)

// envVars is a flag's environment variable, FLAKED_<NAME> with dashes as
// underscores. Every flag has one (docs/cli.md). Flags of one name on
// several commands share it only when they mean the same (the fleet's
// --redis, the daemon's --listen); a flag whose name means something else
// on another command takes commandEnvVars.
func envVars(flag string) []string {
	return []string{"FLAKED_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

// commandEnvVars is FLAKED_<COMMAND>_<NAME>: the environment variable of a
// flag whose name another command uses for something else (plan's and
// seq create's --rate).
func commandEnvVars(command, flag string) []string {
	return envVars(command + "-" + flag)
}

// intFlag is an integer flag that refuses values outside lo..hi while the
// flags (and their environment variables) are parsed, naming the range.
func intFlag(name string, value, lo, hi int, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{
		Name:    name,
		Value:   &boundedInt{v: value, lo: lo, hi: hi},
		EnvVars: envVars(name),
		Usage:   fmt.Sprintf("%s, %d..%d", usage, lo, hi),
	}
}

type boundedInt struct{ v, lo, hi int }

func (b *boundedInt) String() string { return strconv.Itoa(b.v) }

func (b *boundedInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil || v < b.lo || v > b.hi {
		return fmt.Errorf("want an integer in %d..%d", b.lo, b.hi)
	}
	b.v = v
	return nil
}

// durationFlag is intFlag for durations (cli has no bounded durations).
// c.Duration reads it: cli parses the String of a flag's value.
func durationFlag(name string, value, lo, hi time.Duration, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{
		Name:    name,
		Value:   &boundedDuration{v: value, lo: lo, hi: hi},
		EnvVars: envVars(name),
		Usage:   fmt.Sprintf("%s, %s..%s", usage, shortDuration(lo), shortDuration(hi)),
	}
}

type boundedDuration struct{ v, lo, hi time.Duration }

func (b *boundedDuration) String() string { return b.v.String() }

func (b *boundedDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < b.lo || v > b.hi {
		return fmt.Errorf("want a duration in %s..%s", shortDuration(b.lo), shortDuration(b.hi))
	}
	b.v = v
	return nil
}

// shortDuration writes d as flags are written: 0, 10m, 1h rather than
// Go's 0s, 10m0s, 1h0m0s.
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m" // 10m0s, 1h0m0s
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h" // 1h0m
	}
	return s
}

// checkNamespace refuses a --namespace the registry would refuse, before
// anything connects.
func checkNamespace(ns string) error {
	if _, err := coord.NewRegistry(nil, coord.Options{Namespace: ns}); err != nil {
		return usageError{fmt.Errorf("--namespace: %w", err)}
	}
	return nil
}

// redisClient connects to the fleet's Redis at a --redis URL; a URL that
// cannot be used is a usage error.
func redisClient(url string) (redis.UniversalClient, error) {
	rdb, err := redisurl.NewClient(url)
	if err != nil {
		return nil, usageError{fmt.Errorf("--redis: %w", err)}
	}
	return rdb, nil
}

const minReplicasUsage = "the fewest replicas every claim, renewal and counter segment must reach (WAIT), whatever the fleet's high-water mark says; " +
	"unset: 1 with a redis-sentinel:// --redis (a Sentinel deployment has a replica to promote), 0 otherwise; " +
	"it closes the split-brain windows of docs/model.md, and grants stop while fewer replicas are online"

// minReplicasFromFlags is --min-replicas when given (flag or environment),
// else the default for --redis (coord.DefaultMinReplicas).
func minReplicasFromFlags(c *cli.Context) int {
	if c.IsSet("min-replicas") {
		return c.Int("min-replicas")
	}
	return coord.DefaultMinReplicas(c.String("redis"))
}

// doctorMinReplicas is the nodes' floor as doctor.Target takes it: an
// explicit 0 is doctor.NoMinReplicas (the zero value is the default).
func doctorMinReplicas(n int) int {
	if n == 0 {
		return doctor.NoMinReplicas
	}
	return n
}
