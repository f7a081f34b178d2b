package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"
)

// healthcheckCommand probes a flaked HTTP endpoint: the container health
// check of images without curl (distroless).
func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "exit 0 when an HTTP endpoint (default the local /readyz) answers 200, else 1",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:9121/readyz", EnvVars: envVars("url"),
				Usage: "the endpoint to probe"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Second, EnvVars: envVars("timeout"),
				Usage: "how long to wait for the answer, > 0"},
		},
		Action: func(c *cli.Context) error {
			if c.Duration("timeout") <= 0 {
				return usagef("--timeout %v: must be > 0", c.Duration("timeout"))
			}
			hc := http.Client{Timeout: c.Duration("timeout")}
			resp, err := hc.Get(c.String("url"))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s: %s", c.String("url"), resp.Status, body)
			}
			fmt.Fprintf(c.App.Writer, "%s", body)
			return nil
		},
	}
}
