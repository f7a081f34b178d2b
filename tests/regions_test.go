package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

// Two regions, each a fleet of built flaked binaries on its own
// redis-server, in a JS-safe layout with 4 machine bits split by 1 region
// bit: per region two flake nodes, a counter node and an auto node, under
// load from many connections. No ID repeats across both regions, every ID
// is below 2^53, and each daemon's machine IDs are inside its region's
// range, its counter IDs under its region's own counter machine ID. A
// node of region 1 pointed at region 0's Redis is refused, naming both
// layouts.
func TestRegions_TwoRedis_Binaries_NoDuplicate(t *testing.T) {
	var ds []*Daemon
	var layouts []flake.Layout
	var urls []string
	for region := range 2 {
		srv := redisServer(t, false)
		urls = append(urls, srv.URL())
		flags := []string{"--bits-id", "53", "--bits-sequence", "8", "--bits-machine", "4", "--bits-region", "1", "--region", strconv.Itoa(region)}
		l, err := flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 4, BitsRegion: 1, Region: region}.Layout()
		if err != nil {
			t.Fatal(err)
		}
		initRegistry(t, append([]string{"--redis", srv.URL()}, flags...)...)
		for i, mode := range []string{"flake", "flake", "counter", "auto"} {
			d := NewDaemon(t, fmt.Sprintf("r%d-node%d-%s", region, i+1, mode), srv.URL(), append(flags, "--mode", mode)...)
			d.MustStart()
			ds = append(ds, d)
			layouts = append(layouts, l)
		}
	}
	for _, d := range ds {
		d.WaitReady(t, 20*time.Second)
	}
	stopWatch := Watch(t, ds)
	load := StartLoad(ds, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(200_000)), 2*time.Minute, "IDs from both regions")
	load.Stop()
	stopWatch()
	load.Check(t, layouts[0])
	for i, d := range ds {
		l := layouts[i]
		ids := load.IDsOf(d.Name)
		if len(ids) == 0 {
			t.Errorf("%s issued nothing", d.Name)
		}
		for _, id := range ids {
			p := l.Decompose(id)
			if id >= 1<<53 || p.MachineID < l.MinMachineID() || p.MachineID > l.CounterMachineID() {
				t.Fatalf("%s issued %d %+v: want below 2^53, machine ID in %d..%d", d.Name, id, p, l.MinMachineID(), l.CounterMachineID())
			}
			if strings.HasSuffix(d.Name, "counter") != (p.MachineID == l.CounterMachineID()) && !strings.HasSuffix(d.Name, "auto") {
				t.Fatalf("%s issued %d with machine ID %d (region %d's counter is %d)", d.Name, id, p.MachineID, l.Region, l.CounterMachineID())
			}
		}
	}
	stray := NewDaemon(t, "r1-stray", urls[0], "--bits-id", "53", "--bits-sequence", "8", "--bits-machine", "4", "--bits-region", "1", "--region", "1")
	err := stray.Start()
	if err == nil {
		stray.Kill()
		t.Fatal("a region-1 node started on region 0's Redis")
	}
	if !strings.Contains(err.Error(), layouts[0].String()) || !strings.Contains(err.Error(), layouts[4].String()) {
		t.Fatalf("the region-1 node on region 0's Redis: %v; want both layouts named", err)
	}
}
