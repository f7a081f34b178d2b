package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flaked/flaked/internal/idtest"
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

// NEXTIDS n STRING: an array of bulk strings, strictly increasing, in
// RESP2 and RESP3; the count is checked first, then the option.
func TestNEXTIDS_String(t *testing.T) {
	ts := startServer(t, Options{MaxBatch: 50})
	c := ts.dial(t)
	var all []uint64
	for _, hello := range []string{"HELLO 2\r\n", "HELLO 3\r\n"} {
		c.do(hello)
		got := c.do("NEXTIDS 50 string\r\n")
		if !strings.HasPrefix(got, "[$") || strings.Contains(got, ":") {
			t.Fatalf("NEXTIDS 50 STRING = %.60q", got)
		}
		ids := idsIn(t, got)
		if len(ids) != 50 {
			t.Fatalf("%d IDs, want 50", len(ids))
		}
		all = append(all, ids...)
	}
	idtest.Increasing(t, ts.gen.g.Layout(), "NEXTIDS STRING", all)
	for _, tc := range []struct{ req, want string }{
		{"NEXTIDS 51 STRING\r\n", "-ERR NEXTIDS count must be an integer in 1..50"},
		{"NEXTIDS 5 NUMBER\r\n", "-ERR syntax error: the only option of NEXTIDS is STRING (IDs as bulk strings)"},
		{"NEXTIDS 5 STRING x\r\n", "-ERR syntax error: the only option of NEXTIDS is STRING (IDs as bulk strings)"},
		{"NEXTIDS\r\n", "-ERR wrong number of arguments for 'nextids' command"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	if n := ts.issued(); n != 100 {
		t.Errorf("%d IDs issued, want 100", n)
	}
}
