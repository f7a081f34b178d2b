package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

func parseCommand() *cli.Command {
	return &cli.Command{
		Name:      "parse",
		Usage:     "decode an ID offline (decimal or 13-character Crockford base32)",
		ArgsUsage: "<id>",
		Flags: append(layoutFlags(),
			&cli.BoolFlag{Name: "json", EnvVars: []string{"FLAKED_JSON"}, Usage: "print one JSON object"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("parse takes one ID, got %d arguments", c.NArg())
			}
			l, err := layoutFromFlags(c)
			if err != nil {
				return err
			}
			arg := c.Args().First()
			id, err := flake.ParseID(arg)
			if err != nil && len(arg) == flake.Base32Len {
				id, err = flake.ParseBase32(arg)
			}
			if err != nil {
				return usageError{err}
			}
			p := l.Decompose(id)
			mode := "flake"
			if p.MachineID == l.CounterMachineID() {
				mode = "counter"
			}
			out := struct {
				ID       string `json:"id"`
				Base32   string `json:"base32"`
				Time     string `json:"time"`
				Tick     int64  `json:"tick"`
				Sequence int    `json:"sequence"`
				Machine  int    `json:"machine"`
				Mode     string `json:"mode"`
			}{flake.FormatID(id), flake.FormatBase32(id), p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), p.Tick, p.Sequence, p.MachineID, mode}
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(out)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "id:       %s\nbase32:   %s\ntime:     %s\ntick:     %d\nsequence: %d\nmachine:  %d\nmode:     %s\n",
				out.ID, out.Base32, out.Time, out.Tick, out.Sequence, out.Machine, out.Mode)
			return nil
		},
	}
}
