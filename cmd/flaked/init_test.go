package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flaked/flaked/internal/redistest"
)

// flaked init makes the registry once and refuses a second time (status
// 1, naming why), so it cannot reset the loss floors of a fleet that has
// issued IDs; bad layout flags are usage errors (status 2).
func TestInit_OnceThenRefused(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	var out, errOut bytes.Buffer
	if code := run([]string{"flaked", "init", "--redis", srv.URL(), "--bits-id", "53", "--bits-machine", "12"}, &out, &errOut); code != exitOK {
		t.Fatalf("init: status %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "made for a new fleet") {
		t.Fatalf("init printed %q", out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"flaked", "init", "--redis", srv.URL(), "--bits-id", "53", "--bits-machine", "12"}, &out, &errOut); code != exitFailure ||
		!strings.Contains(errOut.String(), "registry exists") {
		t.Fatalf("a second init: status %d, %q; want 1 and registry exists", code, errOut.String())
	}
	if code := run([]string{"flaked", "init", "--redis", srv.URL(), "--bits-id", "99"}, &out, &errOut); code != exitUsage {
		t.Fatalf("init with --bits-id 99: status %d, want %d", code, exitUsage)
	}
}
