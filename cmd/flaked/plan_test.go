package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flaked/flaked/flake"
)

// plan --json prints the layout's own figures (flake's tests hold those to
// the generator), and the text says the same.
func TestPlan_FiguresAreTheLayouts(t *testing.T) {
	args := append([]string{"plan", "--json", "--rate", "100000", "--nodes", "3"}, jsArgs...)
	code, out, errs := runT(t, nil, args...)
	var p plan
	if code != exitOK || json.Unmarshal([]byte(out), &p) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	l, _ := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8}.Layout()
	if p.IDsPerSecond != 25_600 || p.MachineIDs != 255 || p.FleetIDsPerSecond != 25_600*255 || p.CounterIDsPerSecond != 25_600 ||
		!p.TimeBitsEnd.Equal(l.TickTime(l.MaxTick()+1)) || p.Above2to53 != nil || !p.JSSafe || p.BitsID != 53 || p.BitsTime != 37 {
		t.Errorf("plan %+v", p)
	}
	if p.MachineIDsForRate != 4 || p.MachineIDsPerNode != 2 || p.Fits == nil || !*p.Fits {
		t.Errorf("100,000 IDs/s on 3 nodes: %d machine IDs, %d per node, fits %v; want 4, 2, true", p.MachineIDsForRate, p.MachineIDsPerNode, p.Fits)
	}
	code, out, _ = runT(t, nil, append([]string{"plan"}, jsArgs...)...)
	for _, want := range []string{"25,600", "255 leasable of 256", "6,528,000 IDs/s", "2068-07-21T06:52:14.72Z", "never (every ID is below 2^53"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("plan text lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runT(t, nil, "plan")
	if code != exitOK || !strings.Contains(out, "IDs pass 2^53:         2025-03-04T03:18:29.12Z") || !strings.Contains(out, "2199-03-19") {
		t.Errorf("default plan:\n%s", out)
	}
}

func TestPlan_RegionsAndRates(t *testing.T) {
	code, out, _ := runT(t, nil, "plan", "--bits-machine", "4", "--bits-region", "1", "--region", "1", "--rate", "200000")
	for _, want := range []string{"7 leasable of 8", "regions:               2 of 8 machine IDs each; region 1 leases 8..14, its counter is 15",
		"179,200 IDs/s in flake mode per region", "200,000 IDs/s needs 8 machine IDs: does NOT fit (7 leasable machine IDs)"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	// An epoch whose time bits have run out is planned (serve refuses it).
	code, out, _ = runT(t, nil, append([]string{"plan", "--epoch", "1970-01-01T00:00:00Z"}, jsArgs...)...)
	if code != exitOK || !strings.Contains(out, "time bits ran out:     2013-07-21T06:52:14.72Z (serve refuses this epoch)") {
		t.Errorf("old epoch:\n%s", out)
	}
	for _, bad := range [][]string{{"--rate", "-1"}, {"--nodes", "-2"}, {"--bits-id", "52"}, {"extra"}} {
		code, out, errs := runT(t, nil, append([]string{"plan"}, bad...)...)
		if code != exitUsage || out != "" || errs == "" {
			t.Errorf("plan %v: exit %d, stdout %q, stderr %q; want exit 2", bad, code, out, errs)
		}
	}
}
