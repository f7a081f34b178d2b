package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

// maxBitsSeqMachine is the most bits sequence and machine ID may share: the
// time keeps at least flake.MinBitsTime of the 63.
const maxBitsSeqMachine = 63 - flake.MinBitsTime

// layoutFlags are the ID layout flags shared by commands. The layout is
// fleet-wide, so every command that makes or reads IDs takes all four.
func layoutFlags() []cli.Flag {
	return []cli.Flag{
		intFlag("bits-sequence", flake.DefaultBitsSequence, 1, flake.MaxBitsPart,
			fmt.Sprintf("bits of the sequence within a tick (sequence + machine <= %d)", maxBitsSeqMachine)),
		intFlag("bits-machine", flake.DefaultBitsMachineID, 1, flake.MaxBitsPart,
			"bits of the machine ID; 2^bits-1 is reserved for counter mode"),
		&cli.DurationFlag{Name: "tick", Value: flake.DefaultTimeUnit, EnvVars: envVars("tick"),
			Usage: fmt.Sprintf("length of a tick, >= %v", flake.MinTimeUnit)},
		&cli.StringFlag{Name: "epoch", Value: flake.DefaultStartTime.Format(time.RFC3339), EnvVars: envVars("epoch"),
			Usage: "start of the IDs' time, RFC 3339, not in the future"},
	}
}

// layoutFromFlags validates the layout flags. Its errors are usage errors
// that name the flag and the valid range.
func layoutFromFlags(c *cli.Context) (flake.Layout, error) {
	seq, mach := c.Int("bits-sequence"), c.Int("bits-machine")
	if seq+mach > maxBitsSeqMachine {
		return flake.Layout{}, usagef("--bits-sequence %d + --bits-machine %d = %d bits: must be <= %d, so the time keeps >= %d of the 63 bits",
			seq, mach, seq+mach, maxBitsSeqMachine, flake.MinBitsTime)
	}
	tick := c.Duration("tick")
	if tick < flake.MinTimeUnit {
		return flake.Layout{}, usagef("--tick %v: must be >= %v", tick, flake.MinTimeUnit)
	}
	epoch, err := time.Parse(time.RFC3339, c.String("epoch"))
	if err != nil {
		return flake.Layout{}, usagef("--epoch %q: want an RFC 3339 time such as %s", c.String("epoch"), flake.DefaultStartTime.Format(time.RFC3339))
	}
	if epoch.After(time.Now()) {
		return flake.Layout{}, usagef("--epoch %s: must not be in the future", c.String("epoch"))
	}
	l, err := flake.NewLayout(seq, mach, tick, epoch)
	if err != nil {
		return flake.Layout{}, usageError{fmt.Errorf("layout flags: %w", err)}
	}
	return l, nil
}
