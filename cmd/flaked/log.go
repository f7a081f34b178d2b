package main

import (
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// logFlags are the logging flags; wire adds them to every command.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: envVars("log-level"),
			Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "auto", EnvVars: envVars("log-format"),
			Usage: "json, console, or auto: console on a terminal, else JSON"},
	}
}

// loggerFromFlags builds the logger of a command, writing to w (stderr).
// It sets no zerolog globals: the level lives in the logger.
func loggerFromFlags(c *cli.Context, w io.Writer) (zerolog.Logger, error) {
	var level zerolog.Level
	switch s := c.String("log-level"); s {
	case "debug":
		level = zerolog.DebugLevel
	case "info":
		level = zerolog.InfoLevel
	case "warn":
		level = zerolog.WarnLevel
	case "error":
		level = zerolog.ErrorLevel
	default:
		return zerolog.Logger{}, usagef("--log-level %q: want debug, info, warn or error", s)
	}
	var console bool
	switch s := c.String("log-format"); s {
	case "json":
	case "console":
		console = true
	case "auto":
		console = isTerminal(w)
	default:
		return zerolog.Logger{}, usagef("--log-format %q: want json, console or auto", s)
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(level).Hook(zerolog.HookFunc(stamp)), nil
}

// stamp adds the time with milliseconds (lease renewals and ticks are
// sub-second) without setting zerolog.TimeFieldFormat, a global.
func stamp(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
