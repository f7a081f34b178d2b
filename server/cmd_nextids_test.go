package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestNEXTIDS(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, nil)
	ctx := context.Background()
	var last int64
	for _, n := range []int{1, 2, 100, DefaultMaxBatch} {
		ids, err := rdb.Do(ctx, "NEXTIDS", n).Int64Slice()
		if err != nil {
			t.Fatalf("NEXTIDS %d: %v", n, err)
		}
		if len(ids) != n {
			t.Fatalf("NEXTIDS %d: %d IDs", n, len(ids))
		}
		for i, id := range ids {
			if id <= last {
				t.Fatalf("NEXTIDS %d: [%d] = %d after %d", n, i, id, last)
			}
			last = id
		}
	}
	if got, want := ts.stats.idsFlake.Load(), uint64(1+2+100+DefaultMaxBatch); got != want {
		t.Errorf("ids issued = %d, want %d", got, want)
	}
}

func TestNEXTIDS_BadCount(t *testing.T) {
	for _, max := range []int{0, 50} {
		ts := startServer(t, Options{MaxBatch: max})
		if max == 0 {
			max = DefaultMaxBatch
		}
		c := ts.dial(t)
		want := fmt.Sprintf("-ERR NEXTIDS count must be an integer in 1..%d", max)
		for _, n := range []string{"0", "-1", "1000000000", strconv.Itoa(max + 1), "ten", "", "1.5", "+5", " 5", "05", "99999999999999999999999"} {
			if got := c.do(resp("NEXTIDS", n)); got != want {
				t.Errorf("MaxBatch %d: NEXTIDS %q = %q, want %q", max, n, got, want)
			}
		}
		if got := c.do("NEXTIDS\r\n"); got != "-ERR wrong number of arguments for 'nextids' command" {
			t.Errorf("NEXTIDS without a count: %q", got)
		}
		if got := c.do(resp("NEXTIDS", strconv.Itoa(max))); !strings.HasPrefix(got, "[:") {
			t.Errorf("NEXTIDS %d: %.40q", max, got)
		}
		if got := ts.stats.idsFlake.Load(); got != uint64(max) {
			t.Errorf("ids issued = %d, want %d", got, max)
		}
		ts.checkServes(t)
	}
}
