package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is set when building a release:
// go build -ldflags "-X main.version=v1.2.3" ./cmd/flaked
var version = "dev"

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, the Go version and the VCS revision",
		Action: func(c *cli.Context) error {
			line := fmt.Sprintf("flaked %s %s", version, runtime.Version())
			if info, ok := debug.ReadBuildInfo(); ok {
				var rev, modified string
				for _, s := range info.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.modified":
						if s.Value == "true" {
							modified = " (modified)"
						}
					}
				}
				if rev != "" {
					line += " revision " + rev + modified
				}
			}
			fmt.Fprintln(c.App.Writer, line)
			return nil
		},
	}
}
