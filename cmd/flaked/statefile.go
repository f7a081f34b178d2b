package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/daemon"
	"github.com/flaked/flaked/statefile"
)

// geteuid is os.Geteuid; tests take the place of a user who is not root.
var geteuid = os.Geteuid

// stateFileFlags are serve's flags for the state file. The state file is
// on by default, also with Redis: a standalone node has no other record of
// the IDs it issued, and a fleet node keeps its machine ID across restarts
// and a second copy of its reservation.
func stateFileFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state-file", EnvVars: envVars("state-file"),
			Usage: "local state file (machine IDs and reservation) that makes restarts reuse the ID and stay unique; " +
				"default: state-<listen port>.json in $STATE_DIRECTORY (systemd's StateDirectory=), else /var/lib/flaked as root, " +
				"else $XDG_STATE_HOME/flaked or ~/.local/state/flaked"},
		&cli.BoolFlag{Name: "no-state-file", EnvVars: envVars("no-state-file"),
			Usage: "run without a state file (standalone: a restart may then repeat IDs of the previous run)"},
	}
}

// stateFileFromFlags is the state file serve runs with ("" for none) and
// where its name came from, for the start-up log. Opting out takes
// --no-state-file: an empty --state-file is refused, since an unset
// variable in a unit file or script gives one, and must not turn off what
// keeps restarts unique.
func stateFileFromFlags(c *cli.Context, listen string) (path, from string, err error) {
	switch {
	case c.Bool("no-state-file") && c.String("state-file") != "":
		// An empty one agrees with --no-state-file: it is how a container
		// whose image sets FLAKED_STATE_FILE runs without a state file.
		return "", "", usagef("--state-file (or FLAKED_STATE_FILE, which the container image sets) and --no-state-file exclude each other; with --no-state-file set FLAKED_STATE_FILE empty")
	case c.Bool("no-state-file"):
		return "", "--no-state-file", nil
	case c.IsSet("state-file") && c.String("state-file") == "":
		return "", "", usagef("--state-file (FLAKED_STATE_FILE) is empty: give a path, or --no-state-file to run without one")
	case c.IsSet("state-file"):
		return c.String("state-file"), "--state-file", nil
	}
	dir, from, err := defaultStateDir(os.Getenv, geteuid())
	if err != nil {
		return "", "", err
	}
	_, port, _ := net.SplitHostPort(listen) // checked before
	return filepath.Join(dir, "state-"+port+".json"), from, nil
}

// defaultStateDir is where a state file lives by the host's conventions:
// the directory systemd made for the unit, the system's state directory
// for root, else the user's (XDG Base Directory). The file name carries
// the listen port, so two daemons on one host get a file each; two on one
// file are refused by its lock.
func defaultStateDir(getenv func(string) string, euid int) (dir, from string, err error) {
	if d, _, _ := strings.Cut(getenv("STATE_DIRECTORY"), ":"); d != "" {
		return d, "$STATE_DIRECTORY", nil // several are colon-separated: the first
	}
	if euid == 0 {
		return "/var/lib/flaked", "/var/lib/flaked (root)", nil
	}
	// The XDG spec has relative paths ignored.
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "flaked"), "$XDG_STATE_HOME", nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "flaked"), "$HOME/.local/state", nil
	}
	return "", "", usagef("no default place for the state file ($STATE_DIRECTORY, $XDG_STATE_HOME and $HOME are unset): give --state-file PATH, or --no-state-file")
}

// explainStart adds to a node's start failure what the operator can do
// about it: a default state file that cannot be made says it was the
// default and how to choose another.
func explainStart(err error, o daemon.Options) error {
	if errors.Is(err, statefile.ErrIO) && o.StateFrom != "--state-file" {
		return fmt.Errorf("%w (the default state file, from %s: give --state-file PATH, or --no-state-file)", err, o.StateFrom)
	}
	return err
}
