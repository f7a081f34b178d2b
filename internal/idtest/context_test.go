package idtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/idtest"
)

func TestContext_EndsAfterDOrWithTheTest(t *testing.T) {
	ctx := idtest.Context(t, 10*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end after its timeout")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ctx.Err() = %v, want the deadline", ctx.Err())
	}
	var inner context.Context
	t.Run("sub", func(t *testing.T) { inner = idtest.Context(t, time.Hour) })
	if !errors.Is(inner.Err(), context.Canceled) {
		t.Fatalf("after its test ended, ctx.Err() = %v, want canceled", inner.Err())
	}
}
