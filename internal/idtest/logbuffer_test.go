package idtest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flaked/flaked/internal/idtest"
)

func TestLogBuffer_ConcurrentWritesAndReads(t *testing.T) {
	var l idtest.LogBuffer
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&l, "w%d %d\n", w, i)
				_ = l.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(l.String(), "\n"); got != 400 {
		t.Fatalf("%d lines, want 400", got)
	}
}
