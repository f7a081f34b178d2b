package poll

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = sprintf(format, args...)
}

func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		time.Sleep(20 * time.Millisecond)
		n.Store(1)
	}()
	ft := &fakeT{TB: t}
	Until(ft, 10*time.Second, "n set", func() bool { return n.Load() == 1 })
	if ft.failed != "" {
		t.Fatal(ft.failed)
	}
}

func TestUntilFailsNamingWhat(t *testing.T) {
	ft := &fakeT{TB: t}
	start := time.Now()
	Until(ft, 30*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(ft.failed, "waiting for the moon") || !strings.Contains(ft.failed, "30ms") {
		t.Fatalf("failure %q, want it to name what and the timeout", ft.failed)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
}

func TestUntilNilReportsTheLastError(t *testing.T) {
	ft := &fakeT{TB: t}
	i := 0
	UntilNil(ft, 20*time.Millisecond, "a reply", func() error {
		i++
		return errors.New("attempt " + strings.Repeat("I", min(i, 3)))
	})
	if !strings.Contains(ft.failed, "waiting for a reply: attempt III") {
		t.Fatalf("failure %q, want the last error", ft.failed)
	}
	if err := Wait(time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
