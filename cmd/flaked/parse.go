package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

func parseCommand() *cli.Command {
	return &cli.Command{
		Name:      "parse",
		Usage:     "decode an ID offline under the layout flags",
		ArgsUsage: "<id>",
		Description: fmt.Sprintf("The ID is decimal (0..%d) or %d Crockford base32 characters;\n"+
			"a string of digits only is read as decimal.", uint64(flake.MaxID), flake.Base32Len),
		Flags: append(layoutFlags(),
			&cli.BoolFlag{Name: "json", EnvVars: envVars("json"), Usage: "print one JSON object (the id as a string)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("want one ID, got %d arguments", c.NArg())
			}
			l, err := layoutFromFlags(c)
			if err != nil {
				return err
			}
			id, err := parseIDArg(c.Args().First())
			if err != nil {
				return usageError{err}
			}
			zerolog.Ctx(c.Context).Debug().Stringer("layout", l).Uint64("id", id).Msg("parse")
			p := parseOutput(l, id)
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(p)
			}
			_, err = fmt.Fprintf(c.App.Writer, "id:       %s\nbase32:   %s\ntime:     %s\ntick:     %d\nsequence: %d\nmachine:  %d\nmode:     %s\n",
				p.ID, p.Base32, p.Time, p.Tick, p.Sequence, p.Machine, p.Mode)
			return err
		},
	}
}

// parsed is what parse prints. The id is a JSON string: 63-bit integers
// lose precision as JSON numbers in many languages.
type parsed struct {
	ID       string `json:"id"`
	Base32   string `json:"base32"`
	Time     string `json:"time"`
	Tick     int64  `json:"tick"`
	Sequence int    `json:"sequence"`
	Machine  int    `json:"machine"`
	Mode     string `json:"mode"`
}

func parseOutput(l flake.Layout, id uint64) parsed {
	p := l.Decompose(id)
	mode := "flake"
	if p.MachineID == l.CounterMachineID() {
		mode = "counter"
	}
	return parsed{
		ID:       flake.FormatID(id),
		Base32:   flake.FormatBase32(id),
		Time:     p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Tick:     p.Tick,
		Sequence: p.Sequence,
		Machine:  p.MachineID,
		Mode:     mode,
	}
}

// parseIDArg reads a decimal or base32 ID; digits only mean decimal.
func parseIDArg(s string) (uint64, error) {
	if strings.Trim(s, "0123456789") == "" || len(s) != flake.Base32Len {
		id, err := flake.ParseID(s)
		if err != nil {
			return 0, fmt.Errorf("%w or %d Crockford base32 characters", err, flake.Base32Len)
		}
		return id, nil
	}
	return flake.ParseBase32(s)
}
