package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

func runT(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code := run(append([]string{"flaked"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestParse_PrintsEveryField(t *testing.T) {
	l := flake.DefaultLayout()
	tick := l.Tick(time.Date(2026, 2, 3, 4, 5, 6, 70_000_000, time.UTC))
	id, _ := l.Compose(tick, 17, 4242)
	code, out, errs := runT(t, nil, "parse", flake.FormatID(id))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"id:       " + flake.FormatID(id), "time:     2026-02-03T04:05:06.070Z", "sequence: 17", "machine:  4242", "mode:     flake"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	// Base32 input and JSON output agree.
	code, out, _ = runT(t, nil, "parse", "--json", flake.FormatBase32(id))
	var got map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("exit %d, output %q", code, out)
	}
	if got["id"] != flake.FormatID(id) || got["machine"] != float64(4242) || got["tick"] != float64(tick) {
		t.Fatalf("json = %v", got)
	}
	counter, _ := l.Compose(tick, 1, l.CounterMachineID())
	if _, out, _ := runT(t, nil, "parse", flake.FormatID(counter)); !strings.Contains(out, "mode:     counter") {
		t.Fatalf("counter ID not named: %s", out)
	}
}

func TestParse_LayoutFlagsAndEnv(t *testing.T) {
	l, _ := flake.NewLayout(12, 10, time.Millisecond, flake.DefaultStartTime)
	id, _ := l.Compose(123456, 7, 9)
	code, out, errs := runT(t, map[string]string{"FLAKED_BITS_SEQUENCE": "12"}, "parse", "--bits-machine", "10", "--tick", "1ms", flake.FormatID(id))
	if code != 0 || !strings.Contains(out, "sequence: 7") || !strings.Contains(out, "machine:  9") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
}

func TestParse_BadInput_Exit2NamesRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"parse", "banana"}, "0..9223372036854775807"},
		{[]string{"parse", "-5"}, ""},
		{[]string{"parse", "9223372036854775808"}, "0..9223372036854775807"},
		{[]string{"parse"}, "one ID"},
		{[]string{"parse", "--bits-sequence", "31", "1"}, "1..30"},
		{[]string{"parse", "--bits-sequence", "-1", "1"}, "1..30"},
		{[]string{"parse", "--bits-sequence", "0", "1"}, "1..30"},
		{[]string{"parse", "--bits-sequence", "20", "--bits-machine", "20", "1"}, ">= 32"},
		{[]string{"parse", "--tick", "500us", "1"}, ">= 1ms"},
		{[]string{"parse", "--epoch", "yesterday", "1"}, "RFC 3339"},
		{[]string{"parse", "--bits-sequence", "eight", "1"}, ""},
		{[]string{"parse", "--no-such-flag", "1"}, ""},
	} {
		code, _, errs := runT(t, nil, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	if code, out, _ := runT(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "flaked ") {
		t.Fatalf("exit %d: %q", code, out)
	}
}
