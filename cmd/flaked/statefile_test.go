package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/internal/redistest"
)

// The default state file's directory follows the host's conventions, in
// order; without any of them serve asks for a flag.
func TestDefaultStateDir_Conventions(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		euid     int
		dir, src string
	}{
		{map[string]string{"STATE_DIRECTORY": "/run/sd/flaked:/other", "HOME": "/home/u"}, 0, "/run/sd/flaked", "$STATE_DIRECTORY"},
		{map[string]string{"STATE_DIRECTORY": "/var/lib/x", "XDG_STATE_HOME": "/xdg"}, 1000, "/var/lib/x", "$STATE_DIRECTORY"},
		{map[string]string{"XDG_STATE_HOME": "/xdg", "HOME": "/root"}, 0, "/var/lib/flaked", "/var/lib/flaked (root)"},
		{map[string]string{"XDG_STATE_HOME": "/xdg", "HOME": "/home/u"}, 1000, "/xdg/flaked", "$XDG_STATE_HOME"},
		{map[string]string{"XDG_STATE_HOME": "relative/xdg", "HOME": "/home/u"}, 1000, "/home/u/.local/state/flaked", "$HOME/.local/state"},
		{map[string]string{"HOME": "/home/u"}, 1000, "/home/u/.local/state/flaked", "$HOME/.local/state"},
		{nil, 1000, "", ""},
	} {
		dir, src, err := defaultStateDir(func(k string) string { return tc.env[k] }, tc.euid)
		if tc.dir == "" {
			if exitStatus(err) != exitUsage || !strings.Contains(err.Error(), "--no-state-file") {
				t.Errorf("env %v: %q, %v; want a usage error naming --no-state-file", tc.env, dir, err)
			}
			continue
		}
		if err != nil || dir != tc.dir || src != tc.src {
			t.Errorf("env %v euid %d: %q from %q, %v; want %q from %q", tc.env, tc.euid, dir, src, err, tc.dir, tc.src)
		}
	}
}

// Opting out takes --no-state-file; an empty --state-file (or
// FLAKED_STATE_FILE) is refused, and so are both flags at once.
func TestServe_StateFileFlags_EmptyOrBothRefused(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--state-file", ""}, "--state-file (FLAKED_STATE_FILE) is empty"},
		{map[string]string{"FLAKED_STATE_FILE": ""}, nil, "--state-file (FLAKED_STATE_FILE) is empty"},
		{nil, []string{"--state-file", "/tmp/x", "--no-state-file"}, "exclude each other"},
		{map[string]string{"FLAKED_STATE_FILE": "/var/lib/flaked/state"}, []string{"--no-state-file"}, "set FLAKED_STATE_FILE empty"},
	} {
		code, _, errs := runT(t, tc.env, append([]string{"serve", "--listen", "127.0.0.1:1"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 and %q", tc.env, tc.args, code, errs, tc.want)
		}
	}
}

// The container image sets FLAKED_STATE_FILE; --no-state-file with it set
// empty runs without a state file (the way docs/operating.md gives).
func TestServe_NoStateFile_WithEmptyEnv(t *testing.T) {
	t.Setenv("FLAKED_STATE_FILE", "")
	d := startServe(t, "--listen", redistest.FreeAddr(t), "--no-state-file")
	if !strings.Contains(d.logs.String(), `"state_file":""`) {
		t.Errorf("want no state file:\n%s", d.logs.String())
	}
	d.stop()
	if err := <-d.done; err != nil {
		t.Fatal(err)
	}
}

// daemonRun is one in-process `flaked serve`, stopped by stop.
type daemonRun struct {
	logs *idtest.LogBuffer
	done chan error
	stop context.CancelFunc
}

// startServe runs serve in-process with args and waits for its start-up
// line.
func startServe(t *testing.T, args ...string) daemonRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := daemonRun{logs: &idtest.LogBuffer{}, done: make(chan error, 1), stop: cancel}
	t.Cleanup(cancel)
	go func() {
		d.done <- newApp(io.Discard, d.logs).RunContext(ctx, append([]string{"flaked", "serve", "--log-format", "json"}, args...))
	}()
	poll.UntilNil(t, 20*time.Second, "flaked serving", func() error {
		select {
		case err := <-d.done:
			t.Fatalf("serve exited at start: %v\n%s", err, d.logs.String())
		default:
		}
		if !strings.Contains(d.logs.String(), `"message":"flaked serving"`) {
			return fmt.Errorf("not serving:\n%s", d.logs.String())
		}
		return nil
	})
	return d
}

// servingLine is the start-up log line's state file fields.
func (d daemonRun) servingLine(t *testing.T) (file, from string) {
	t.Helper()
	for _, line := range strings.Split(d.logs.String(), "\n") {
		var l struct{ Message, State_file, State_file_from string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "flaked serving" {
			return l.State_file, l.State_file_from
		}
	}
	t.Fatalf("no start-up line:\n%s", d.logs.String())
	return "", ""
}

// takeAndStop takes IDs over TCP with NEXTIDS, then stops the daemon
// cleanly (what SIGTERM does).
func (d daemonRun) takeAndStop(t *testing.T, addr string, batches int) []uint64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	var ids []uint64
	for range batches {
		v, err := c.Do(idtest.Context(t, 10*time.Second), "NEXTIDS", 1000).Int64Slice()
		if err != nil {
			t.Fatalf("NEXTIDS: %v\n%s", err, d.logs.String())
		}
		for _, id := range v {
			ids = append(ids, uint64(id))
		}
	}
	d.stop()
	if err := <-d.done; err != nil {
		t.Fatalf("serve: %v\n%s", err, d.logs.String())
	}
	return ids
}

// `flaked serve` with no state flags keeps a state file in the user's state
// directory (named in its start-up line), so a restart with the clock set
// back a minute (--test-clock-offset, the clock of the node and of its
// embedded store) issues above every ID of the run before. With
// --no-state-file the same restart issues below: the default is what
// keeps it unique.
func TestServe_NoFlags_DefaultStateFile_RestartWithClockBack(t *testing.T) {
	geteuid = func() int { return 1000 } // the default of a user, not root's /var/lib
	t.Cleanup(func() { geteuid = os.Geteuid })
	xdg := t.TempDir()
	t.Setenv("STATE_DIRECTORY", "")
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Setenv("HOME", t.TempDir())

	for _, tc := range []struct {
		name  string
		flags []string
		above bool
	}{{"default state file", nil, true}, {"--no-state-file", []string{"--no-state-file"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := redistest.FreeAddr(t)
			first := startServe(t, append([]string{"--listen", addr}, tc.flags...)...)
			file, from := first.servingLine(t)
			before := first.takeAndStop(t, addr, 5)
			second := startServe(t, append([]string{"--listen", addr, "--test-clock-offset", "-1m"}, tc.flags...)...)
			after := second.takeAndStop(t, addr, 5)
			idtest.Unique(t, flake.DefaultLayout(), append(slices.Clone(before), after...))
			below := slices.Min(after) <= slices.Max(before)
			if !tc.above {
				if file != "" || from != "--no-state-file" || !below {
					t.Fatalf("--no-state-file: state file %q from %q; IDs after the restart below the first run's: %v (want true: else this test cannot tell)",
						file, from, below)
				}
				return
			}
			if below {
				t.Fatalf("an ID after the restart (lowest %d) is not above the highest before it (%d)", slices.Min(after), slices.Max(before))
			}
			_, port, _ := strings.Cut(addr, ":")
			if want := filepath.Join(xdg, "flaked", "state-"+port+".json"); file != want || from != "$XDG_STATE_HOME" {
				t.Fatalf("start-up line names state file %q from %q, want %q from $XDG_STATE_HOME", file, from, want)
			}
			if _, err := os.Stat(file); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A default state file that cannot be made fails the start with status 1
// (a fault of the host), saying it was the default and how to choose.
func TestServe_DefaultStateFileUnwritable_Exit1NamingIt(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runT(t, map[string]string{"STATE_DIRECTORY": filepath.Join(blocker, "flaked")},
		"serve", "--listen", redistest.FreeAddr(t))
	for _, want := range []string{filepath.Join(blocker, "flaked", "state-"), "the default state file, from $STATE_DIRECTORY", "--no-state-file"} {
		if code != exitFailure || !strings.Contains(errs, want) {
			t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errs, want)
		}
	}
}
