// Command flaked is the flaked binary. It parses flags and wires packages;
// logic a test needs to reach lives in those packages, not here.
//
// Adding a command is one file that returns a *cli.Command and one line in
// commands below; wire gives it the logging flags, the logger and the exit
// statuses.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/internal/redisinfo"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // something went wrong while running
	exitUsage   = 2 // bad flags, arguments or input
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run is main without the process, so tests run the app in-process.
func run(args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).Run(args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "flaked:", err)
	return exitStatus(err)
}

func exitStatus(err error) int {
	var ue usageError
	var ae actionError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ae):
		return exitFailure
	default: // cli refused the flags or arguments before an action ran
		return exitUsage
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	commands := []*cli.Command{
		serveCommand(),
		initCommand(),
		parseCommand(),
		planCommand(),
		versionCommand(),
		healthcheckCommand(),
		auditCommand(),
		whoisCommand(),
		doctorCommand(),
		seqCommand(),
	}
	for _, cmd := range commands {
		wire(cmd, "", stderr)
	}
	return &cli.App{
		Name:        "flaked",
		Usage:       "unique 63-bit IDs from generators coordinated through Redis (sonyflake layout)",
		Writer:      stdout,
		ErrWriter:   stderr,
		Commands:    commands,
		HideVersion: true, // `flaked version` says more
		Action: func(c *cli.Context) error {
			var names []string
			for _, cmd := range c.App.VisibleCommands() {
				names = append(names, cmd.Name)
			}
			if c.NArg() == 0 {
				return usagef("a command is needed: %s", strings.Join(names, ", "))
			}
			return usagef("unknown command %q: want one of %s", c.Args().First(), strings.Join(names, ", "))
		},
		OnUsageError:   func(_ *cli.Context, err error, _ bool) error { return usageError{err} },
		ExitErrHandler: func(*cli.Context, error) {}, // run decides the status
	}
}

// wire gives a command (and its subcommands) what every command shares:
// the logging flags and a logger in c.Context (zerolog.Ctx), the command's
// name in front of its errors, and the exit status: errors of the action
// are failures (1) unless they are usageErrors; anything refused before the
// action runs (flags, arguments, the logging set-up) is a usage error (2).
func wire(cmd *cli.Command, parent string, stderr io.Writer) {
	name := strings.TrimSpace(parent + " " + cmd.Name)
	for _, sub := range cmd.Subcommands {
		wire(sub, name, stderr)
	}
	cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return usageError{fmt.Errorf("%s: %w", name, err)}
	}
	if cmd.Action == nil {
		return
	}
	cmd.Flags = append(cmd.Flags, logFlags()...)
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		log, err := loggerFromFlags(c, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		c.Context = log.WithContext(c.Context)
		// go-redis's own lines (failed dials while Redis is away, ...) go
		// through our logger, so JSON logs stay JSON.
		redis.SetLogger(redisLogger{log})
		if before != nil {
			return before(c)
		}
		return nil
	}
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if err := action(c); err != nil {
			return actionError{fmt.Errorf("%s: %w", name, redisinfo.ExplainNoPerm(err))}
		}
		return nil
	}
}

// usageError marks errors caused by the user's input (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// actionError marks errors returned by a command's action (exit status 1
// unless a usageError is inside).
type actionError struct{ err error }

func (e actionError) Error() string { return e.err.Error() }
func (e actionError) Unwrap() error { return e.err }

// redisLogger sends go-redis's log lines to zerolog at warn level.
type redisLogger struct{ log zerolog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn().Str("component", "go-redis").Msgf(format, v...)
}
