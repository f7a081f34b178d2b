package audit

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	serverOld = "1111111111aaaaaaaaaa1111111111aaaaaaaaaa:2222222222bbbbbbbbbb2222222222bbbbbbbbbb"
	serverNew = "3333333333cccccccccc3333333333cccccccccc:4444444444dddddddddd4444444444dddddddddd"
)

// copiesFixture: machine ID 4 through a Redis failover and copies of one
// state file (node node1).
//
//	50h  Redis failed over (no machine ID); web-5 claims 4 at the loss floor
//	20h  web-6 starts from a copy of web-5's state file: takes 4 over,
//	     fencing web-5, whose next renewal is refused
//	10h  web-7 starts from an older copy: 4 is held under its node, it
//	     takes 5 instead (a clone, live now)
//	5h   the fleet layout, lost with Redis's data, is restored by web-6
//	4h   web-6 renews after another possible loss, with a lease missing
//	3h   {ns}:meta was gone at web-6's renewal
func copiesFixture() *fixture {
	f := fleetFixture()
	h := time.Hour
	lossFloor := f.tick(50*h - 5*time.Second)
	f.event(50*h, "dataloss", -1, tokA, "web-5", "50", "10.0.0.5:7379", "server", serverNew, "previous_server", serverOld,
		"detail", "Redis server changed (restart or failover): writes acknowledged before may be lost; claims start a horizon later and the counter a lead later")
	f.event(50*h, "claim", 4, tokA, "web-5", "50", "10.0.0.5:7379", "floor", strconv.FormatInt(lossFloor, 10),
		"prev_host", "", "prev_pid", "", "prev_addr", "", "prev_token", "", "mode", "flake", "fenced", "", "node", node1,
		"loss_floor", strconv.FormatInt(lossFloor, 10))
	f.event(20*h, "reclaim", 4, tokB, "web-6", "60", "10.0.0.6:7379", "floor", strconv.FormatInt(f.tick(20*h-time.Second), 10),
		"prev_host", "web-5", "prev_pid", "50", "prev_addr", "10.0.0.5:7379", "prev_token", tokA, "mode", "flake",
		"fenced", tokA, "node", node1, "loss_floor", strconv.FormatInt(lossFloor, 10))
	f.event(20*h-3*time.Second, "fenced", 4, tokA, "web-5", "50", "10.0.0.5:7379", "holder", tokB, "holder_host", "web-6", "holder_pid", "60",
		"detail", "taken over by a process that started from a copy of this owner's state file")
	f.event(10*h, "clone", 4, tokC, "web-7", "70", "10.0.0.7:7379", "holder", tokB, "node", node1, "holder_host", "web-6", "holder_pid", "60",
		"detail", "a live process holds this machine ID under the same state-file node ID: two processes run from copies of one state file")
	f.event(5*h, "layout_restored", 4, tokB, "web-6", "60", "10.0.0.6:7379", "layout", f.s.LayoutText,
		"detail", "fleet layout missing: restored by a node of the fleet")
	f.event(4*h, "renew_fail", 4, tokB, "web-6", "60", "10.0.0.6:7379", "reason", "lease missing after possible data loss",
		"loss_ms", ms(4*h+time.Second), "held", strconv.FormatInt(f.tick(4*h-2*time.Second), 10))
	f.event(3*h, "dataloss", 4, tokB, "web-6", "60", "10.0.0.6:7379", "generation", "gen1",
		"detail", "registry metadata missing at renewal: Redis lost its data; meta and layout restored by this owner")
	f.liveOwner(4, "web-6", "60", "10.0.0.6:7379", tokB, node1)
	f.liveOwner(5, "web-7", "70", "10.0.0.7:7379", tokC, node1)
	f.s.Meta.Server, f.s.Meta.LossAt = serverNew, fixtureNow.Add(-3*h)
	// In stream order, as Redis keeps them.
	slices.SortStableFunc(f.s.Events, func(a, b Event) int { return a.Time.Compare(b.Time) })
	f.s.Stream.FirstID, f.s.Stream.LastID = f.s.Events[0].ID, f.s.Events[len(f.s.Events)-1].ID
	return f
}

func TestWriteHistory_CopiesAndLoss_Golden(t *testing.T) {
	f := copiesFixture()
	var b bytes.Buffer
	for _, mid := range []int{4, 12} {
		if err := WriteHistory(&b, HistoryOf(f.s, mid)); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	golden(t, "history_copies.golden", b.Bytes())
	out := b.String()
	for _, w := range []string{
		"reclaim          web-6 pid 60 addr 10.0.0.6:7379 token bbbb5555",
		"fenced the live lease token aaaa1111 its state file named",
		"fenced           web-5 pid 50 addr 10.0.0.5:7379 token aaaa1111  taken over by web-6 pid 60 token bbbb5555, which started from a copy of this owner's state file",
		"clone            web-7 pid 70 addr 10.0.0.7:7379 token cccc9999  not taken: held by web-6 pid 60 token bbbb5555, a live process started from a copy of the same state file (node " + node1 + ")",
		"server 33333333:44444444, was 11111111:22222222",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("history lacks %q", w)
		}
	}
	// A data loss is in every ID's history, also the failover that
	// names no machine ID.
	if strings.Count(out, "Redis server changed (restart or failover)") != 2 || strings.Count(out, "registry metadata missing at renewal") != 2 {
		t.Errorf("the losses are not in both histories:\n%s", out)
	}
	for _, tok := range []string{tokA, tokB, tokC} {
		if strings.Contains(out, tok) {
			t.Errorf("history holds the whole token %s", tok)
		}
	}
	// JSON: the fields whole, but tokens shortened.
	h := HistoryOf(f.s, 4)
	if e := h.Events[2]; e.Type != "reclaim" || e.Fields["fenced"] != "aaaa1111" || e.Fields["node"] != node1 {
		t.Errorf("reclaim fields %v", e.Fields)
	}
	if e := h.Events[0]; e.Type != "dataloss" || e.Fields["server"] != serverNew || e.Fields["previous_server"] != serverOld {
		t.Errorf("dataloss fields %v", e.Fields)
	}
}
