package main

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

// layoutFlags are the ID layout flags shared by commands. The layout is
// fleet-wide, so every command that makes or reads IDs takes all of them.
func layoutFlags() []cli.Flag {
	return []cli.Flag{
		intFlag("bits-id", flake.DefaultBitsID, flake.MinBitsID, flake.MaxBitsID,
			"bits of the whole ID; 53 keeps every ID below 2^53 for JavaScript clients (time bits = id - sequence - machine)"),
		intFlag("bits-sequence", flake.DefaultBitsSequence, 1, flake.MaxBitsPart,
			fmt.Sprintf("bits of the sequence within a tick (sequence + machine <= bits-id - %d)", flake.MinBitsTime)),
		intFlag("bits-machine", flake.DefaultBitsMachineID, 1, flake.MaxBitsPart,
			"bits of the machine ID; the last ID of each region (2^bits-1 without regions) is reserved for counter mode"),
		&cli.DurationFlag{Name: "tick", Value: flake.DefaultTimeUnit, EnvVars: envVars("tick"),
			Usage: fmt.Sprintf("length of a tick, >= %v", flake.MinTimeUnit)},
		&cli.StringFlag{Name: "epoch", Value: flake.DefaultStartTime.Format(time.RFC3339), EnvVars: envVars("epoch"),
			Usage: "start of the IDs' time, RFC 3339, not in the future"},
		intFlag("bits-region", 0, 0, flake.MaxBitsPart-1,
			"top bits of the machine ID naming a region (a fleet with its own Redis), fewer than --bits-machine; 0: no regions"),
		intFlag("region", 0, 0, 1<<(flake.MaxBitsPart-1)-1,
			"this fleet's region, below 2^bits-region: its registry leases only the region's machine IDs"),
	}
}

// layoutFromFlags validates the layout flags. Its errors are usage errors
// that name the flag and the valid range.
func layoutFromFlags(c *cli.Context) (flake.Layout, error) {
	bitsID, seq, mach := c.Int("bits-id"), c.Int("bits-sequence"), c.Int("bits-machine")
	if seq+mach > bitsID-flake.MinBitsTime {
		return flake.Layout{}, usagef("--bits-sequence %d + --bits-machine %d = %d bits: must be <= %d, so the time keeps >= %d of the %d bits (--bits-id)",
			seq, mach, seq+mach, bitsID-flake.MinBitsTime, flake.MinBitsTime, bitsID)
	}
	region, bitsRegion := c.Int("region"), c.Int("bits-region")
	if bitsRegion >= mach {
		return flake.Layout{}, usagef("--bits-region %d: valid range is 0..%d (fewer than --bits-machine %d)", bitsRegion, mach-1, mach)
	}
	if region >= 1<<bitsRegion {
		return flake.Layout{}, usagef("--region %d: valid range is 0..%d (--bits-region %d)", region, 1<<bitsRegion-1, bitsRegion)
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
	l, err := flake.Settings{BitsID: bitsID, BitsSequence: seq, BitsMachineID: mach, TimeUnit: tick, StartTime: epoch,
		BitsRegion: bitsRegion, Region: region}.Layout()
	if err != nil {
		return flake.Layout{}, usageError{fmt.Errorf("layout flags: %w", err)}
	}
	return l, nil
}

// endWarning is how close the end of the time bits may come before serve
// warns: a fleet needs years to move to another layout.
const endWarning = 10 * 365 * 24 * time.Hour

// checkServeLayout refuses a layout whose time bits have already run out
// at now (its generators could issue nothing: UidGenerator's default
// layout ran out in 2024 and its users learnt it from negative IDs), warns
// when they run out within endWarning, and says whether IDs can exceed
// 2^53, which JavaScript's numbers round.
func checkServeLayout(l flake.Layout, now time.Time, log zerolog.Logger) error {
	end := l.End()
	if !now.Before(end) {
		return usagef("--epoch %s: the layout's %d time bits of %v ticks ran out on %s; no ID can be issued: take a later --epoch, a longer --tick or more time bits (see flaked plan)",
			l.StartTime.Format(time.RFC3339), l.BitsTime, l.TimeUnit, end.Format(time.RFC3339))
	}
	if end.Sub(now) < endWarning {
		log.Warn().Time("time_bits_end", end).Str("layout", l.String()).
			Msg("the layout's time bits run out within 10 years: after that no ID can be issued; plan a new layout (flaked plan)")
	}
	if at, ok := l.SafeIntegerEnd(); ok {
		log.Warn().Time("above_2^53_from", at).Int("bits_id", l.BitsID()).
			Msg("IDs can exceed 2^53, which JavaScript numbers cannot hold exactly: JavaScript clients read IDs as strings (NEXTID STRING, the HTTP API), or a new fleet takes a 53-bit layout (flaked plan --bits-id 53 --bits-sequence 8 --bits-machine 8)")
	} else {
		log.Info().Int("bits_id", l.BitsID()).Msg("every ID is below 2^53 (JavaScript-safe)")
	}
	return nil
}
