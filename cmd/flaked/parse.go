package main

import (
	"encoding/json"
	"fmt"
	"io"
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
			if err == nil {
				err = l.CheckID(id)
			}
			if err != nil {
				return usageError{err}
			}
			zerolog.Ctx(c.Context).Debug().Stringer("layout", l).Uint64("id", id).Msg("parse")
			p := parseOutput(l, id)
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(p)
			}
			return writeParsed(c.App.Writer, p)
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
	Region   *int   `json:"region,omitempty"` // in a layout with regions
	Mode     string `json:"mode"`
	// JSSafe: the ID is below 2^53, so JavaScript's numbers hold it.
	JSSafe bool `json:"js_safe"`
}

func writeParsed(w io.Writer, p parsed) error {
	region := ""
	if p.Region != nil {
		region = fmt.Sprintf("region:   %d\n", *p.Region)
	}
	_, err := fmt.Fprintf(w, "id:       %s\nbase32:   %s\ntime:     %s\ntick:     %d\nsequence: %d\nmachine:  %d\n%smode:     %s\njs-safe:  %t\n",
		p.ID, p.Base32, p.Time, p.Tick, p.Sequence, p.Machine, region, p.Mode, p.JSSafe)
	return err
}

func parseOutput(l flake.Layout, id uint64) parsed {
	p := l.Decompose(id)
	mode := "flake"
	if l.IsCounterMachineID(p.MachineID) {
		mode = "counter"
	}
	var region *int
	if l.BitsRegion > 0 {
		region = &p.Region
	}
	return parsed{
		Region:   region,
		JSSafe:   id < 1<<flake.SafeIntegerBits,
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
