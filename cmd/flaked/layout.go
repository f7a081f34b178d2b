package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

// layoutFlags are the ID layout flags shared by commands.
func layoutFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "bits-sequence", Value: flake.DefaultBitsSequence, EnvVars: []string{"FLAKED_BITS_SEQUENCE"},
			Usage: "sequence bits, 1..30; time bits = 63 - sequence - machine must be >= 32"},
		&cli.IntFlag{Name: "bits-machine", Value: flake.DefaultBitsMachineID, EnvVars: []string{"FLAKED_BITS_MACHINE"},
			Usage: "machine-ID bits, 1..30; the last ID (2^bits-1) is reserved for counter mode"},
		&cli.DurationFlag{Name: "tick", Value: flake.DefaultTimeUnit, EnvVars: []string{"FLAKED_TICK"},
			Usage: "length of a tick, >= 1ms"},
		&cli.StringFlag{Name: "epoch", Value: flake.DefaultStartTime.Format(time.RFC3339), EnvVars: []string{"FLAKED_EPOCH"},
			Usage: "start of time for IDs, RFC 3339, not in the future"},
	}
}

func layoutFromFlags(c *cli.Context) (flake.Layout, error) {
	epoch, err := time.Parse(time.RFC3339, c.String("epoch"))
	if err != nil {
		return flake.Layout{}, usagef("--epoch %q: want an RFC 3339 time such as 2025-01-01T00:00:00Z", c.String("epoch"))
	}
	seq, mach := c.Int("bits-sequence"), c.Int("bits-machine")
	if seq == 0 || mach == 0 {
		return flake.Layout{}, usagef("--bits-sequence %d / --bits-machine %d: valid range is 1..30", seq, mach)
	}
	if c.Duration("tick") <= 0 {
		return flake.Layout{}, usagef("--tick %v: must be >= 1ms", c.Duration("tick"))
	}
	l, err := flake.NewLayout(seq, mach, c.Duration("tick"), epoch)
	if err != nil {
		return flake.Layout{}, usageError{fmt.Errorf("layout: %w", err)}
	}
	if epoch.After(time.Now()) {
		return flake.Layout{}, usagef("--epoch %s is in the future", c.String("epoch"))
	}
	return l, nil
}
