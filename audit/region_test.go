package audit

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

// regionFixture is a region-1 registry of a layout with 4 machine bits and
// 1 region bit: it leases 8..14, 15 is its counter's.
func regionFixture(t *testing.T) *fixture {
	t.Helper()
	l, err := flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 1}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture()
	f.s.Layout, f.s.LayoutText = l, l.String()
	return f
}

// whois names an ID's region, answers counter mode for its region's
// counter, and sends an ID of another region to that region's registry
// instead of naming an owner from this one.
func TestWhoIs_Regions(t *testing.T) {
	f := regionFixture(t)
	l := f.s.Layout
	tick := f.tick(time.Hour)
	for _, tc := range []struct {
		mid, region int
		mode, why   string
	}{
		{3, 0, "flake", "machine ID 3 is in region 0 (machine IDs 0..7); this registry is region 1's (8..15): ask region 0's"},
		{7, 0, "counter", "ask region 0's"},
		{15, 1, "counter", "counter mode"},
		{9, 1, "flake", "no claim of machine ID 9"},
	} {
		id, _ := l.Compose(tick, 1, tc.mid)
		w, err := WhoIs(f.s, id)
		if err != nil {
			t.Fatal(err)
		}
		if w.Region == nil || *w.Region != tc.region || w.Mode != tc.mode || !strings.Contains(w.Explanation, tc.why) {
			t.Errorf("machine %d: region %v mode %s why %q; want region %d, %s, %q", tc.mid, w.Region, w.Mode, w.Explanation, tc.region, tc.mode, tc.why)
		}
		var b bytes.Buffer
		if err := WriteWhois(&b, w); err != nil || !strings.Contains(b.String(), "region:    "+string(rune('0'+tc.region))+"\n") {
			t.Errorf("machine %d: whois text lacks its region:\n%s", tc.mid, b.String())
		}
	}
	if _, err := WhoIs(f.s, 1<<63-1); err != nil {
		t.Errorf("a 63-bit ID in a 63-bit layout: %v", err)
	}
}

// verify: a region's registry holding a machine ID of another region, or
// its own counter's, is a finding that names the region's range.
func TestVerify_Regions(t *testing.T) {
	f := regionFixture(t)
	f.s.Records[3] = &Record{MachineID: 3, Registered: true, Reserved: 1, HasReserved: true}
	f.s.Records[15] = &Record{MachineID: 15, Registered: true, Reserved: 1, HasReserved: true}
	rep := Build(f.s)
	var msgs []string
	for _, fd := range rep.Findings {
		msgs = append(msgs, fd.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"is outside the layout's machine IDs 8..14 (region 1 of 2)",
		"is the counter-mode machine ID (15, the last of region 1)"} {
		if !strings.Contains(all, want) {
			t.Errorf("findings lack %q:\n%s", want, all)
		}
	}
	if rep.Summary.Leasable != 7 {
		t.Errorf("leasable %d, want 7", rep.Summary.Leasable)
	}
}

// whois refuses an ID wider than a 53-bit layout's, naming the range.
func TestWhoIs_BitsID53_RefusesWiderID(t *testing.T) {
	f := newFixture()
	l, _ := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8}.Layout()
	f.s.Layout, f.s.LayoutText = l, l.String()
	if _, err := WhoIs(f.s, 1<<53); err == nil || !strings.Contains(err.Error(), "0..9007199254740991") {
		t.Fatalf("WhoIs(2^53) = %v, want an error naming 0..2^53-1", err)
	}
}
