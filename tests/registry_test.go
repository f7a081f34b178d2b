package tests

import (
	"strconv"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/redisurl"
)

// InitRegistry makes the registry a daemon with d's flags runs under (its
// --redis, --namespace and layout flags), as flaked init does for a new
// fleet but with no loss floor to wait out (redistest.InitRegistry): a
// daemon refuses to start on a namespace without one (NOREGISTRY). Tests
// call it before the first daemon of a fleet on a fresh Redis, never after
// a loss they cause (it would hide the loss from the fleet).
// TestQuickStart_InitServeNextID runs the real flaked init.
func (d *Daemon) InitRegistry() {
	d.t.Helper()
	initRegistry(d.t, d.Args...)
}

// initRegistry is InitRegistry for serve flags (with --redis).
func initRegistry(tb testing.TB, flags ...string) {
	tb.Helper()
	f := map[string]string{}
	for i := 0; i+1 < len(flags); i++ {
		if len(flags[i]) > 2 && flags[i][:2] == "--" {
			f[flags[i][2:]] = flags[i+1]
		}
	}
	num := func(name string) int {
		if f[name] == "" {
			return 0
		}
		n, err := strconv.Atoi(f[name])
		if err != nil {
			tb.Fatalf("--%s %q: %v", name, f[name], err)
		}
		return n
	}
	s := flake.Settings{BitsID: num("bits-id"), BitsSequence: num("bits-sequence"), BitsMachineID: num("bits-machine"),
		BitsRegion: num("bits-region"), Region: num("region")}
	if v := f["tick"]; v != "" {
		var err error
		if s.TimeUnit, err = time.ParseDuration(v); err != nil {
			tb.Fatal(err)
		}
	}
	if v := f["epoch"]; v != "" {
		var err error
		if s.StartTime, err = time.Parse(time.RFC3339, v); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := s.Layout()
	if err != nil {
		tb.Fatal(err)
	}
	if f["redis"] == "" {
		tb.Fatal("initRegistry: no --redis")
	}
	rdb, err := redisurl.NewClient(f["redis"])
	if err != nil {
		tb.Fatal(err)
	}
	defer rdb.Close()
	ns := f["namespace"]
	if ns == "" {
		ns = coord.DefaultNamespace
	}
	if err := redistest.InitRegistry(ctxT(tb), rdb, ns, l.String()); err != nil {
		tb.Fatalf("the registry of namespace %s on %s: %v", ns, f["redis"], err)
	}
}
