package main

import (
	"context"
	"strings"
	"testing"

	"github.com/flaked/flaked/internal/redistest"
)

// flaked audit replicas reports a mark above the replicas online (grants
// refused: exit 1, naming the fix) and --set lowers it.
func TestAuditReplicas_ReportAndSet(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	if err := srv.Client(t).HSet(ctx, "{flaked}:meta", "generation", "g", "replicas", 2).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runT(t, nil, "audit", "replicas", "--redis", srv.URL())
	if code != exitFailure || !strings.Contains(out, "high-water mark 2") || !strings.Contains(errs, "flaked audit replicas --set 0") {
		t.Fatalf("mark 2, no replica: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runT(t, nil, "audit", "replicas", "--redis", srv.URL(), "--set", "0")
	if code != exitOK || !strings.Contains(out, "high-water mark 0") {
		t.Fatalf("--set 0: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if n, _ := srv.Client(t).XLen(ctx, "{flaked}:events").Result(); n != 1 {
		t.Errorf("%d events after --set, want the replicas event", n)
	}
	if code, _, _ = runT(t, nil, "audit", "replicas", "--redis", srv.URL(), "--set", "-2"); code != exitUsage {
		t.Errorf("--set -2: exit %d, want %d", code, exitUsage)
	}
	code, _, errs = runT(t, nil, "audit", "replicas", "--redis", srv.URL(), "--namespace", "empty", "--set", "0")
	if code != exitFailure || !strings.Contains(errs, "no registry") {
		t.Errorf("--set on a namespace without a registry: exit %d, stderr %q", code, errs)
	}
}
