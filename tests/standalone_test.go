package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// stateFileOf is the state file a daemon's start-up line names.
func stateFileOf(t *testing.T, d *Daemon) string {
	t.Helper()
	d.mu.Lock()
	logs := d.log.String()
	d.mu.Unlock()
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Message   string
			StateFile string `json:"state_file"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "flaked serving" {
			return l.StateFile
		}
	}
	t.Fatalf("%s: no start-up line:\n%s", d.Name, logs)
	return ""
}

// Two standalone daemons on one host, started without state flags, get a
// default state file each (the listen port is in its name) and issue
// unique IDs. A third pointed at the first one's file is refused at start,
// naming the file and the PID holding it: two processes on one state file
// would claim the same machine ID in their own embedded stores.
func TestStandalone_TwoDaemons_DefaultStateFiles_NotShared(t *testing.T) {
	var ds []*Daemon
	for _, name := range []string{"a", "b"} {
		d := NewDaemon(t, name, "")
		d.Args = nil // no --redis: the embedded store
		d.StateFile, d.DefaultStateFile = "", true
		d.MustStart()
		ds = append(ds, d)
	}
	fa, fb := stateFileOf(t, ds[0]), stateFileOf(t, ds[1])
	if fa == fb || !strings.HasSuffix(fa, fmt.Sprintf("state-%d.json", ds[0].Port)) ||
		!strings.HasPrefix(fa, os.Getenv("STATE_DIRECTORY")) {
		t.Fatalf("state files %q and %q: want one each, state-<port>.json in $STATE_DIRECTORY", fa, fb)
	}
	load := StartLoad(ds, 2, batch)
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "IDs from both")
	load.Stop()
	load.Check(t, defaultLayout())

	code, out := runServe(t, redistest.FreePort(t), "--state-file", fa)
	want := fmt.Sprintf("held by pid %d", ds[0].Pid())
	if code != 2 || !strings.Contains(out, fa) || !strings.Contains(out, want) {
		t.Fatalf("a third daemon on %s: exit %d, output:\n%s\nwant exit 2 naming the file and %q", fa, code, out, want)
	}
}
