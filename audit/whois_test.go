package audit

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// takeoverFixture: machine ID 1 was web-1's (claimed 40 days ago, floor
// A), then web-2 took it over a day ago (floor B), then web-2 was killed.
func takeoverFixture() (f *fixture, floorA, floorB int64) {
	f = fleetFixture()
	a, _ := f.s.Events[0].Int("floor")
	b, _ := f.s.Events[7].Int("floor")
	return f, a, b
}

func TestWhoIs_BeforeAndAfterTakeover(t *testing.T) {
	f, floorA, floorB := takeoverFixture()
	l := f.s.Layout
	for _, tc := range []struct {
		name      string
		tick      int64
		machine   int
		known     bool
		host      string
		wantInWhy string
	}{
		{"first tick of web-1", floorA + 1, 1, true, "web-1", "next claim, the takeover"},
		{"last tick web-1 may have used", floorB, 1, true, "web-1", "next claim, the takeover"},
		{"first tick of web-2", floorB + 1, 1, true, "web-2", "no later claim is recorded"},
		{"web-2 at its reservation", f.s.Records[1].Reserved, 1, true, "web-2", "no later claim"},
		{"above the reservation", f.s.Records[1].Reserved + 1, 1, false, "web-2", "above the reservation"},
		{"before the first claim, complete history", floorA, 1, false, "", "history is complete"},
		{"released ID", f.s.Records[2].Reserved, 2, true, "web-3", "released the ID at"},
		{"live ID", f.s.Records[0].Reserved, 0, true, "web-1", "holds the lease now"},
		{"never claimed", 5000, 40, false, "", "no claim of machine ID 40 was ever recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := l.Compose(tc.tick, 3, tc.machine)
			if err != nil {
				t.Fatal(err)
			}
			w, err := WhoIs(f.s, id)
			if err != nil {
				t.Fatal(err)
			}
			host := ""
			if w.Owner != nil {
				host = w.Owner.Host
			}
			if w.Known != tc.known || host != tc.host || w.Tick != tc.tick || w.MachineID != tc.machine ||
				!strings.Contains(w.Explanation, tc.wantInWhy) {
				t.Errorf("known %v owner %q tick %d machine %d, why %q\nwant known %v owner %q, why containing %q",
					w.Known, host, w.Tick, w.MachineID, w.Explanation, tc.known, tc.host, tc.wantInWhy)
			}
		})
	}
}

func TestWhoIs_TrimmedHistory_SaysItDoesNotReachBack(t *testing.T) {
	f, floorA, floorB := takeoverFixture()
	// Trim the stream after web-1's claim: the takeover is the oldest
	// claim of ID 1 left.
	f.s.Events = f.s.Events[1:]
	f.s.Stream.Complete = false
	l := f.s.Layout
	id, _ := l.Compose(floorA+1, 0, 1)
	w, err := WhoIs(f.s, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"does not reach back far enough", "owner before that claim was web-1 pid 4242"} {
		if w.Known || w.Owner != nil || !strings.Contains(w.Explanation, want) {
			t.Errorf("known %v owner %v, why %q: want unknown, why containing %q", w.Known, w.Owner, w.Explanation, want)
		}
	}
	// After the takeover the answer does not need the trimmed events.
	id, _ = l.Compose(floorB+1, 0, 1)
	if w, _ := WhoIs(f.s, id); !w.Known || w.Owner.Host != "web-2" {
		t.Errorf("after takeover: %+v", w)
	}
	// With every claim of ID 0 trimmed, its owner data still names the
	// owner.
	f.s.Events = f.s.Events[2:]
	id, _ = l.Compose(f.s.Records[0].Reserved, 0, 0)
	if w, _ := WhoIs(f.s, id); !w.Known || w.Source != "owner data" || w.Owner.Host != "web-1" {
		t.Errorf("from owner data: %+v", w)
	}
}

func TestWhoIs_CounterID_NamesNodesInCounterMode(t *testing.T) {
	f := fleetFixture()
	l := f.s.Layout
	id, _ := l.Compose(l.Tick(fixtureNow.Add(-time.Hour)), 9, l.CounterMachineID())
	w, err := WhoIs(f.s, id)
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode != "counter" || !w.Known || len(w.CounterNodes) != 1 || w.CounterNodes[0].Host != "web-4" {
		t.Fatalf("%+v", w)
	}
	// Before web-4 switched, no node was in counter mode.
	id, _ = l.Compose(l.Tick(fixtureNow.Add(-21*time.Hour)), 9, l.CounterMachineID())
	if w, _ := WhoIs(f.s, id); len(w.CounterNodes) != 0 || !strings.Contains(w.Explanation, "no mode event shows") {
		t.Fatalf("%+v", w)
	}
}

func TestWhoIs_NoLayout_Error(t *testing.T) {
	f := newFixture()
	f.s.LayoutText, f.s.Layout.BitsTime = "", 0
	if _, err := WhoIs(f.s, 12345); err == nil || !strings.Contains(err.Error(), "{flaked}:layout is missing") {
		t.Fatalf("err %v", err)
	}
}

func TestWriteWhois_Golden(t *testing.T) {
	f, floorA, floorB := takeoverFixture()
	l := f.s.Layout
	var b bytes.Buffer
	for _, p := range []struct {
		tick    int64
		machine int
	}{{floorA + 10, 1}, {floorB + 10, 1}, {floorA, 1}, {l.Tick(fixtureNow.Add(-time.Hour)), l.CounterMachineID()}} {
		id, _ := l.Compose(p.tick, 7, p.machine)
		w, err := WhoIs(f.s, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteWhois(&b, w); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	golden(t, "whois.golden", b.Bytes())
}

func TestWriteHistory_Golden(t *testing.T) {
	f := fleetFixture()
	var b bytes.Buffer
	for _, mid := range []int{1, 9, 12} {
		if err := WriteHistory(&b, HistoryOf(f.s, mid)); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	golden(t, "history.golden", b.Bytes())
}
