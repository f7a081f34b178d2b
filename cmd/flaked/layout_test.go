package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

var jsArgs = []string{"--bits-id", "53", "--bits-sequence", "8", "--bits-machine", "8"}

// The last ID of the JS-safe layout (last tick, last sequence, the counter
// machine ID) is 2^53-1 and decodes; 2^53 is not one of its IDs.
func TestParse_BitsID53_Extremes(t *testing.T) {
	l, err := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	last, _ := l.Compose(l.MaxTick(), l.MaxSequence(), l.CounterMachineID())
	code, out, errs := runT(t, nil, append(append([]string{"parse", "--json"}, jsArgs...), flake.FormatID(last))...)
	var p parsed
	if code != exitOK || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if p.ID != "9007199254740991" || p.Tick != l.MaxTick() || p.Sequence != 255 || p.Machine != 255 || p.Mode != "counter" || !p.JSSafe {
		t.Fatalf("parse 2^53-1 = %+v", p)
	}
	code, out, errs = runT(t, nil, append(append([]string{"parse"}, jsArgs...), "9007199254740992")...)
	if code != exitUsage || out != "" || !strings.Contains(errs, "0..9007199254740991") {
		t.Fatalf("parse 2^53 under 53 bits: exit %d, stdout %q, stderr %q; want exit 2 naming the range", code, out, errs)
	}
}

func TestParse_Region_Shown(t *testing.T) {
	l, _ := flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 1}.Layout()
	for _, tc := range []struct{ mid, region int }{{3, 0}, {7, 0}, {8, 1}, {15, 1}} {
		id, _ := l.Compose(1000, 2, tc.mid)
		code, out, _ := runT(t, nil, "parse", "--bits-machine", "4", "--bits-region", "1", flake.FormatID(id))
		want := "region:   " + string(rune('0'+tc.region)) + "\n"
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("machine %d: exit %d, want %q in:\n%s", tc.mid, code, want, out)
		}
		if tc.mid == 7 || tc.mid == 15 { // each region's last: its counter's
			if !strings.Contains(out, "mode:     counter\n") {
				t.Errorf("machine %d is region %d's counter:\n%s", tc.mid, tc.region, out)
			}
		}
	}
	if _, out, _ := runT(t, nil, "parse", "1"); strings.Contains(out, "region") {
		t.Errorf("a layout without regions prints a region:\n%s", out)
	}
}

func TestLayoutFlags_Bad_Exit2NamingRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"bits-id 52", nil, []string{"--bits-id", "52"}, "53..63"},
		{"bits-id 64", nil, []string{"--bits-id", "64"}, "53..63"},
		{"env bits-id", map[string]string{"FLAKED_BITS_ID": "70"}, nil, "FLAKED_BITS_ID"},
		{"53 bits, too little time", nil, []string{"--bits-id", "53", "--bits-sequence", "12", "--bits-machine", "10"}, "must be <= 21"},
		{"bits-region = bits-machine", nil, []string{"--bits-machine", "4", "--bits-region", "4"}, "--bits-region 4: valid range is 0..3"},
		{"region too large", nil, []string{"--bits-machine", "4", "--bits-region", "1", "--region", "2"}, "--region 2: valid range is 0..1"},
		{"region without bits", nil, []string{"--region", "1"}, "--region 1: valid range is 0..0"},
		{"negative region", nil, []string{"--region", "-1"}, "0.."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runT(t, tc.env, append(append([]string{"parse"}, tc.args...), "1")...)
			if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming %q", code, out, errs, tc.want)
			}
		})
	}
}

// serveLog runs serve's flag checks with args and returns the log and the
// error.
func serveLog(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	cmd := &cli.Command{Name: "serve", Flags: serveFlags(), Action: func(c *cli.Context) error {
		_, err := serveOptionsFromFlags(c, zerolog.New(&buf))
		return err
	}}
	err := testApp(cmd).Run(append([]string{"flaked", "serve"}, args...))
	return buf.String(), err
}

// serve says at start whether IDs can pass 2^53, warns when the time bits
// run out within 10 years, and refuses an epoch so old they already have.
func TestServe_LayoutWarningsAndRefusal(t *testing.T) {
	log, err := serveLog(t)
	if err != nil || !strings.Contains(log, `"level":"warn"`) || !strings.Contains(log, "--bits-id 53") {
		t.Errorf("default layout: err %v, log %s; want a warning naming --bits-id 53", err, log)
	}
	log, err = serveLog(t, jsArgs...)
	if err != nil || strings.Contains(log, "--bits-id 53 keeps") || !strings.Contains(log, "JavaScript-safe") {
		t.Errorf("53-bit layout: err %v, log %s", err, log)
	}
	// 37 time bits of 10 ms last 43.55 years: an epoch 40 years back ends
	// within 10 years; one 50 years back has ended.
	l, _ := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8}.Layout()
	life := l.End().Sub(l.StartTime)
	soon := time.Now().Add(-life + 5*365*24*time.Hour).UTC().Format(time.RFC3339)
	log, err = serveLog(t, append(jsArgs, "--epoch", soon)...)
	if err != nil || !strings.Contains(log, "run out within 10 years") {
		t.Errorf("epoch %s: err %v, log %s; want the 10-year warning", soon, err, log)
	}
	old := time.Now().Add(-life - time.Hour).UTC()
	_, err = serveLog(t, append(jsArgs, "--epoch", old.Format(time.RFC3339))...)
	ended := flake.Layout{BitsTime: 37, BitsSequence: 8, BitsMachineID: 8, TimeUnit: 10 * time.Millisecond, StartTime: old.Truncate(time.Second)}.End()
	if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "ran out on "+ended.Format(time.RFC3339)) {
		t.Errorf("epoch %s: err %v; want a usage error naming when the time bits ran out (%s)", old, err, ended.Format(time.RFC3339))
	}
}
