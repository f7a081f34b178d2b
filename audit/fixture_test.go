package audit

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./audit/ -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output; got:\n%s\nwant:\n%s", path, got, want)
	}
}

// fixtureNow is the injected "now" (Redis TIME) of every fixture.
var fixtureNow = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

const (
	tokA = "aaaa1111bbbb2222cccc3333dddd4444"
	tokB = "bbbb5555cccc6666dddd7777eeee8888"
	tokC = "cccc9999dddd0000eeee1111ffff2222"
	tokD = "dddd3333eeee4444ffff5555aaaa6666"
	tokE = "eeee7777ffff8888aaaa9999bbbb0000"
)

// fixture builds snapshots by hand: the state a fleet leaves in Redis,
// at fixed times.
type fixture struct {
	s   *Snapshot
	seq int
}

func newFixture() *fixture {
	l := flake.DefaultLayout()
	created := fixtureNow.Add(-40 * 24 * time.Hour)
	return &fixture{s: &Snapshot{
		Namespace:  "flaked",
		Now:        fixtureNow,
		LayoutText: l.String(),
		Layout:     l,
		Meta:       Meta{Present: true, Generation: "gen1", Created: created, CreatedTick: l.Tick(created), Horizon: 401},
		Records:    map[int]*Record{},
		Stream:     Stream{Complete: true},
	}}
}

func (f *fixture) tick(ago time.Duration) int64 { return f.s.Layout.Tick(fixtureNow.Add(-ago)) }

func ms(ago time.Duration) string {
	return strconv.FormatInt(fixtureNow.Add(-ago).UnixMilli(), 10)
}

// event appends an event written ago before now.
func (f *fixture) event(ago time.Duration, kind string, mid int, token, host, pid, addr string, kv ...string) {
	f.seq++
	at := fixtureNow.Add(-ago)
	e := Event{ID: strconv.FormatInt(at.UnixMilli(), 10) + "-" + strconv.Itoa(f.seq), Time: at.UTC(), Type: kind, MachineID: mid,
		Fields: Fields{"type", kind, "mid", strconv.Itoa(mid), "token", token, "host", host, "pid", pid, "addr", addr}}
	if mid < 0 {
		e.Fields.Set("mid", "")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Fields.Set(kv[i], kv[i+1])
	}
	f.s.Events = append(f.s.Events, e)
	if len(f.s.Events) == 1 {
		f.s.Stream.FirstID = e.ID
	}
	f.s.Stream.LastID = e.ID
	f.s.Stream.Length++
	f.s.Stream.EntriesAdded++
}

func owner(host, pid, addr, version, mode, token, state string, heartbeatAgo, firstAgo, claimedAgo time.Duration, floor int64) map[string]string {
	return map[string]string{
		"host": host, "pid": pid, "addr": addr, "version": version, "mode": mode, "token": token, "state": state,
		"heartbeat": ms(heartbeatAgo), "started": ms(claimedAgo), "first_claim": ms(firstAgo), "claimed": ms(claimedAgo),
		"floor": strconv.FormatInt(floor, 10),
	}
}

// fleetFixture: a fleet after some weeks, one of each state.
//
//	0  live     web-1, renewing, reserved 2 s ahead
//	1  expired  web-2 was killed 45 s ago; web-1 (then) owned it before
//	2  released web-3 stopped cleanly 3 h ago
//	3  conflict released, but someone lowered the reservation below the last tick
//	5  orphan   registered, no owner data
//	7  conflict a lease with no owner data and no registration
//	9  pruned   only the reservation is left
//	12 live     web-4 in counter mode (auto), idle: its reservation is old
func fleetFixture() *fixture {
	f := newFixture()
	day := 24 * time.Hour
	f.event(40*day, "claim", 1, tokA, "web-1", "4242", "10.0.0.1:7379", "floor", strconv.FormatInt(f.tick(40*day-4*time.Second), 10), "prev_host", "", "prev_pid", "", "prev_addr", "", "prev_token", "", "mode", "flake")
	f.event(31*day, "claim", 0, tokA, "web-1", "4242", "10.0.0.1:7379", "floor", strconv.FormatInt(f.tick(31*day), 10), "prev_host", "", "prev_pid", "", "prev_addr", "", "prev_token", "", "mode", "flake")
	f.event(31*day, "claim", 9, tokE, "batch-9", "17", "", "floor", strconv.FormatInt(f.tick(31*day), 10), "mode", "flake")
	f.event(30*day, "release", 9, tokE, "batch-9", "17", "", "last", strconv.FormatInt(f.tick(30*day+time.Hour), 10), "reserved", strconv.FormatInt(f.tick(30*day-time.Second), 10))
	f.event(30*day, "prune", 9, "", "ops-1", "900", "", "reserved", strconv.FormatInt(f.tick(30*day+time.Hour), 10), "prev_host", "batch-9", "prev_pid", "17", "prev_addr", "", "prev_token", tokE, "prev_state", "released")
	f.event(2*day, "claim", 2, tokC, "web-3", "31", "10.0.0.3:7379", "floor", strconv.FormatInt(f.tick(2*day), 10), "prev_host", "", "prev_pid", "", "prev_addr", "", "prev_token", "", "mode", "flake")
	f.event(2*day, "claim", 3, tokC, "web-3", "31", "10.0.0.3:7379", "floor", strconv.FormatInt(f.tick(2*day), 10), "mode", "flake")
	f.event(day, "takeover", 1, tokB, "web-2", "77", "10.0.0.2:7379", "floor", strconv.FormatInt(f.tick(day-time.Second), 10), "prev_host", "web-1", "prev_pid", "4242", "prev_addr", "10.0.0.1:7379", "prev_token", tokA, "mode", "flake")
	f.event(day, "claim", 12, tokD, "web-4", "88", "10.0.0.4:7379", "floor", strconv.FormatInt(f.tick(day), 10), "mode", "flake")
	f.event(20*time.Hour, "mode", 12, "", "web-4", "88", "10.0.0.4:7379", "from", "flake", "to", "counter", "reason", "clock is skewed from Redis TIME", "at_ms", ms(20*time.Hour))
	f.event(3*time.Hour, "release", 2, tokC, "web-3", "31", "10.0.0.3:7379", "last", strconv.FormatInt(f.tick(3*time.Hour), 10), "reserved", strconv.FormatInt(f.tick(3*time.Hour-2*time.Second), 10))
	f.event(3*time.Hour, "release", 3, tokC, "web-3", "31", "10.0.0.3:7379", "last", strconv.FormatInt(f.tick(3*time.Hour), 10), "reserved", strconv.FormatInt(f.tick(3*time.Hour-2*time.Second), 10))

	r := f.s.Records
	r[0] = &Record{MachineID: 0, Registered: true, Lease: tokA, LeaseTTL: 8500 * time.Millisecond,
		Owner:    owner("web-1", "4242", "10.0.0.1:7379", "v1.2.0", "flake", tokA, "live", 1200*time.Millisecond, 31*day, 31*day, f.tick(31*day)),
		Reserved: f.tick(-2 * time.Second), HasReserved: true}
	r[1] = &Record{MachineID: 1, Registered: true,
		Owner:    owner("web-2", "77", "10.0.0.2:7379", "v1.2.0", "flake", tokB, "live", 45*time.Second, 40*day, day, f.tick(day-time.Second)),
		Reserved: f.tick(43 * time.Second), HasReserved: true}
	r[2] = &Record{MachineID: 2, Registered: true,
		Owner:    owner("web-3", "31", "10.0.0.3:7379", "v1.1.9", "flake", tokC, "released", 3*time.Hour, 2*day, 2*day, f.tick(2*day)),
		Reserved: f.tick(3 * time.Hour), HasReserved: true}
	r[3] = &Record{MachineID: 3, Registered: true,
		Owner:    owner("web-3", "31", "10.0.0.3:7379", "v1.1.9", "flake", tokC, "released", 3*time.Hour, 2*day, 2*day, f.tick(2*day)),
		Reserved: f.tick(4 * time.Hour), HasReserved: true}
	r[5] = &Record{MachineID: 5, Registered: true, Reserved: f.tick(35 * day), HasReserved: true}
	r[7] = &Record{MachineID: 7, Lease: "ffff0000aaaa1111bbbb2222cccc3333", LeaseTTL: 4 * time.Second, Reserved: f.tick(-time.Second), HasReserved: true}
	r[9] = &Record{MachineID: 9, Reserved: f.tick(30*day + time.Hour), HasReserved: true}
	r[12] = &Record{MachineID: 12, Registered: true, Lease: tokD, LeaseTTL: 9100 * time.Millisecond,
		Owner:    owner("web-4", "88", "10.0.0.4:7379", "v1.2.0", "counter", tokD, "live", 2*time.Second, day, day, f.tick(day)),
		Reserved: f.tick(day - 3*time.Second), HasReserved: true}
	return f
}
