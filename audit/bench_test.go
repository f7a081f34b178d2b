package audit

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// scaleFixture is a registry of n machine IDs (live, expired and released
// in turn) with the event stream at its default cap: 100,000 events
// spread over the IDs.
func scaleFixture(n int) *Snapshot {
	f := newFixture()
	for i := range 100_000 {
		id := i % n
		f.event(time.Duration(100_000-i)*time.Millisecond, "claim", id, tokA, "web-"+strconv.Itoa(id%50), "1", "",
			"floor", strconv.FormatInt(f.tick(time.Hour), 10))
	}
	for id := range n {
		r := &Record{MachineID: id, Registered: true, Reserved: f.tick(-time.Second), HasReserved: true,
			Owner: owner("web-"+strconv.Itoa(id%50), "1", "", "v1", "flake", tokA, "live", time.Second, time.Hour, time.Hour, f.tick(time.Hour))}
		if id%3 == 0 {
			r.Lease, r.LeaseTTL = tokA, 5*time.Second
		}
		f.s.Records[id] = r
	}
	return f.s
}

// Build (what audit, verify and --json print) at 6,000 and 60,000 machine
// IDs with 100,000 events: it must grow with the registry, not with
// registry x events.
//
//	go test -run '^$' -bench Build -benchtime 3x ./audit/
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{6_000, 60_000} {
		s := scaleFixture(n)
		b.Run(fmt.Sprintf("ids=%d", n), func(b *testing.B) {
			for range b.N {
				s.byID = nil // index afresh, as a new read does
				if rep := Build(s); len(rep.Machines) != n {
					b.Fatalf("%d rows, want %d", len(rep.Machines), n)
				}
			}
		})
	}
}
