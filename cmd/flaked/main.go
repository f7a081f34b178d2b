// Command flaked is the flaked binary: it parses flags and wires packages
// (flake, coord, node). Logic a test needs lives in those packages.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // something went wrong while running
	exitUsage   = 2 // bad flags, arguments or input
)

// usageError marks errors caused by the user's input (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run is main without the process: tests call it.
func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "flaked",
		Usage:     "Redis-coordinated unique 63-bit IDs (sonyflake layout)",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			parseCommand(),
			versionCommand(),
		},
		ExitErrHandler: func(*cli.Context, error) {}, // run decides the status
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
	}
	err := app.Run(args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "flaked:", err)
	var ue usageError
	if errors.As(err, &ue) || isFlagError(err) {
		return exitUsage
	}
	return exitFailure
}

// isFlagError recognises urfave/cli's own flag parsing failures.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value", "Required flag", "flag needs an argument"} {
		if contains(msg, p) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
