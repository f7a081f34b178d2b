package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// envVars is a flag's environment variable, FLAKED_<NAME> with dashes as
// underscores. Every flag has one (README, CLI).
func envVars(flag string) []string {
	return []string{"FLAKED_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
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
