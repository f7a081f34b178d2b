package idtest

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends when the test does, or after d at
// the latest, so a test that hangs on Redis or a daemon fails instead.
func Context(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
