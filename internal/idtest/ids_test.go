package idtest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/idtest"
)

// recorder is a testing.TB that keeps what a check reports instead of
// failing the test that runs it.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

// check runs f on a recorder and returns what it reported.
func check(t *testing.T, f func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	f(r)
	return r.failed
}

func id(t *testing.T, l flake.Layout, tick int64, seq, machine int) uint64 {
	t.Helper()
	v, err := l.Compose(tick, seq, machine)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestUnique(t *testing.T) {
	l := flake.DefaultLayout()
	a, b, c := id(t, l, 5, 1, 7), id(t, l, 5, 2, 7), id(t, l, 6, 0, 3)
	for _, ok := range [][]uint64{nil, {a}, {a, b, c}, {c, b, a}} {
		if got := check(t, func(tb testing.TB) { idtest.Unique(tb, l, ok) }); got != nil {
			t.Errorf("Unique(%v) failed: %q", ok, got)
		}
	}
	ids := []uint64{c, a, b, a, c}
	got := check(t, func(tb testing.TB) { idtest.Unique(tb, l, ids) })
	if len(got) != 1 {
		t.Fatalf("Unique(%v) reported %q, want one failure", ids, got)
	}
	for _, want := range []string{"2 duplicate IDs among 5", idtest.Decoded(l, a), idtest.Decoded(l, c),
		"Tick:5 Sequence:1 MachineID:7", "Tick:6 Sequence:0 MachineID:3"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("Unique's message %q does not say %q", got[0], want)
		}
	}
	if ids[0] != c || ids[4] != c {
		t.Errorf("Unique changed its argument: %v", ids)
	}
}

func TestUnique_ListsTenOfMore(t *testing.T) {
	l := flake.DefaultLayout()
	var ids []uint64
	for i := range 30 {
		ids = append(ids, uint64(i), uint64(i))
	}
	got := check(t, func(tb testing.TB) { idtest.Unique(tb, l, ids) })
	if len(got) != 1 || !strings.HasPrefix(got[0], "30 duplicate IDs among 60 (the first 10):") ||
		strings.Count(got[0], "\n") != 10 {
		t.Fatalf("Unique reported %q", got)
	}
}

func TestIncreasing(t *testing.T) {
	l := flake.DefaultLayout()
	a, b, c := id(t, l, 5, 1, 7), id(t, l, 5, 2, 7), id(t, l, 6, 0, 3)
	for _, ok := range [][]uint64{nil, {a}, {a, b, c}} {
		if got := check(t, func(tb testing.TB) { idtest.Increasing(tb, l, "node", ok) }); got != nil {
			t.Errorf("Increasing(%v) failed: %q", ok, got)
		}
	}
	for _, tc := range []struct {
		name string
		ids  []uint64
		want string
	}{
		{"node 2", []uint64{a, c, b}, "node 2: ID " + idtest.Decoded(l, b) + " (index 2) follows " + idtest.Decoded(l, c)},
		{"", []uint64{a, b, b}, "ID " + idtest.Decoded(l, b) + " (index 2) follows " + idtest.Decoded(l, b)},
	} {
		got := check(t, func(tb testing.TB) { idtest.Increasing(tb, l, tc.name, tc.ids) })
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("Increasing(%q, %v) reported %q, want one failure starting %q", tc.name, tc.ids, got, tc.want)
		}
	}
}
