package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/flake"
)

func TestBuild_FleetFixture_StatesAndOwners(t *testing.T) {
	rep := Build(fleetFixture().s)
	want := map[int]struct {
		state State
		host  string
	}{
		0: {Live, "web-1"}, 1: {Expired, "web-2"}, 2: {Released, "web-3"}, 3: {Conflict, "web-3"},
		5: {Orphan, ""}, 7: {Conflict, ""}, 12: {Live, "web-4"},
	}
	var ids []int
	for _, m := range rep.Machines {
		ids = append(ids, m.MachineID)
		w, ok := want[m.MachineID]
		if !ok {
			t.Errorf("machine ID %d listed, want only %v", m.MachineID, want)
			continue
		}
		host := ""
		if m.Owner != nil {
			host = m.Owner.Host
		}
		if m.State != w.state || host != w.host {
			t.Errorf("machine ID %d: state %s host %q, want %s %q", m.MachineID, m.State, host, w.state, w.host)
		}
	}
	if !slices.IsSorted(ids) || len(ids) != len(want) {
		t.Errorf("machine IDs %v: want the %d of the fixture, sorted", ids, len(want))
	}
	s := rep.Summary
	if s.Counts[Live] != 2 || s.Counts[Expired] != 1 || s.Counts[Released] != 1 || s.Counts[Orphan] != 1 || s.Counts[Conflict] != 2 {
		t.Errorf("counts %v", s.Counts)
	}
	// 3 leases (0, 7, 12) of 65,535; 8 IDs named by some key (9 only by
	// its reservation).
	if s.Leasable != 65535 || s.Leased != 3 || s.Free != 65532 || s.NeverUsed != 65535-8 || s.Pruned != 1 {
		t.Errorf("summary %+v", s)
	}
	var checks []string
	for _, f := range rep.Findings {
		checks = append(checks, f.String())
	}
	for _, want := range []string{
		"machine ID 3: reservation ", "below tick ", // the release recorded a higher last tick
		"machine ID 7: leased (token ffff0000) but not a member of {flaked}:machines",
		"machine ID 7: leased (token ffff0000) but {flaked}:owner:7 is missing",
	} {
		if !strings.Contains(strings.Join(checks, "\n"), want) {
			t.Errorf("findings lack %q:\n%s", want, strings.Join(checks, "\n"))
		}
	}
	if len(rep.Findings) != 3 {
		t.Errorf("%d findings, want 3:\n%s", len(rep.Findings), strings.Join(checks, "\n"))
	}
}

func TestWriteTable_Golden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		snap   func() *Snapshot
		filter []State
	}{
		{"fleet", func() *Snapshot { return fleetFixture().s }, nil},
		{"fleet_live_expired", func() *Snapshot { return fleetFixture().s }, []State{Live, Expired}},
		{"empty", func() *Snapshot { return newFixture().s }, nil},
		{"fleet_loss", func() *Snapshot {
			f := fleetFixture()
			f.s.Meta.Server, f.s.Meta.LossAt = serverNew, fixtureNow.Add(-3*time.Hour)
			return f.s
		}, nil},
		{"no_layout", func() *Snapshot {
			f := fleetFixture()
			f.s.LayoutText, f.s.Layout = "", flake.Layout{}
			return f.s
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Build(tc.snap())
			rep.Only(tc.filter)
			var b bytes.Buffer
			if err := WriteTable(&b, rep); err != nil {
				t.Fatal(err)
			}
			golden(t, "table_"+tc.name+".golden", b.Bytes())
		})
	}
}

// TestWriteTable_Aligned: every row's columns start where the header's do.
func TestWriteTable_Aligned(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, Build(fleetFixture().s)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	header := lines[1]
	for _, col := range []string{"STATE", "HOST", "RESERVED AT", "LAST CLAIM"} {
		at := strings.Index(header, col)
		for _, row := range lines[2:9] {
			if at >= len(row) || row[at-1] != ' ' || row[at] == ' ' {
				t.Errorf("column %s (at %d) not aligned in row %q", col, at, row)
			}
		}
	}
}

func TestReport_JSON_Fields(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, Build(fleetFixture().s)); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Namespace string
		Machines  []struct {
			MachineID      int    `json:"machine_id"`
			State          string `json:"state"`
			Owner          *Owner `json:"owner"`
			Mode           string `json:"mode"`
			LeaseTTLMs     *int64 `json:"lease_ttl_ms"`
			HeartbeatAgeMs *int64 `json:"heartbeat_age_ms"`
			ReservedTick   *int64 `json:"reserved_tick"`
			ReservedTime   string `json:"reserved_time"`
		}
		Summary struct {
			Counts map[string]int
			Free   int
		}
		Findings []struct{ Check string }
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	m := got.Machines[0]
	if m.MachineID != 0 || m.State != "live" || m.Owner == nil || m.Owner.Host != "web-1" || m.Owner.PID != 4242 ||
		m.Owner.Token != "aaaa1111" || m.Mode != "flake" || *m.LeaseTTLMs != 8500 || *m.HeartbeatAgeMs != 1200 {
		t.Errorf("machine 0: %+v owner %+v", m, m.Owner)
	}
	l := flake.DefaultLayout()
	if *m.ReservedTick != l.Tick(fixtureNow.Add(2*time.Second)) || m.ReservedTime != "2026-11-01T10:00:02Z" {
		t.Errorf("reservation %d at %s", *m.ReservedTick, m.ReservedTime)
	}
	if got.Summary.Counts["conflict"] != 2 || got.Summary.Free != 65532 || len(got.Findings) != 3 {
		t.Errorf("summary %+v, %d findings", got.Summary, len(got.Findings))
	}
	if strings.Contains(b.String(), tokA) {
		t.Error("JSON holds a whole owner token; want only its first 8 digits")
	}
}

// The header names a possible data loss of the last 24 hours of Redis
// TIME, and its cause; JSON always carries the last one.
func TestWriteTable_LossNote(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ago     time.Duration
		created bool
		want    string // "" for no note
	}{
		{"failover 3h ago", 3 * time.Hour, false, "  last possible data loss 2026-11-01 07:00:00.000 (3h0m ago: Redis restarted or failed over)"},
		{"created 20m ago", 20 * time.Minute, true, "  last possible data loss 2026-11-01 09:40:00.000 (20m0s ago: registry created: a new fleet, or Redis lost everything)"},
		{"just within a day", 24*time.Hour - time.Millisecond, false, "  last possible data loss 2026-10-31 10:00:00.001"},
		{"a day ago", 24 * time.Hour, false, ""},
		{"a month ago", 30 * 24 * time.Hour, false, ""},
		{"a new master's clock behind the old one's", -2 * time.Second, false, "(in 2.0s: Redis restarted or failed over)"},
		{"none", 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetFixture()
			if tc.ago != 0 {
				f.s.Meta.LossAt = fixtureNow.Add(-tc.ago)
			}
			if tc.created {
				f.s.Meta.Created = f.s.Meta.LossAt
			}
			rep := Build(f.s)
			var b bytes.Buffer
			if err := WriteTable(&b, rep); err != nil {
				t.Fatal(err)
			}
			header, _, _ := strings.Cut(b.String(), "\n")
			const base = "namespace flaked  layout time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z  at 2026-11-01 10:00:00.000 UTC (Redis TIME)"
			if !strings.HasPrefix(header, base) || (tc.want == "" && header != base) || !strings.Contains(header, tc.want) {
				t.Errorf("header\n%s\nwant %q after the Redis TIME", header, tc.want)
			}
			switch {
			case tc.ago == 0 && rep.DataLoss != nil:
				t.Errorf("data loss %+v without loss_ms", rep.DataLoss)
			case tc.ago != 0 && (rep.DataLoss == nil || !rep.DataLoss.At.Equal(f.s.Meta.LossAt) ||
				rep.DataLoss.Cause != map[bool]string{true: LossCreated, false: LossServer}[tc.created]):
				t.Errorf("data loss %+v", rep.DataLoss)
			}
		})
	}
}

func TestParseMeta_ServerAndLoss(t *testing.T) {
	m := parseMeta(map[string]string{"generation": "g", "created_ms": "1790000000000", "created_tick": "5", "horizon": "500",
		"server": serverNew, "loss_ms": "1790000360000", "layout_settle_ms": "1790000361000"})
	if m.Server != serverNew || !m.LossAt.Equal(time.UnixMilli(1790000360000)) || m.LossCause() != LossServer || m.Horizon != 500 {
		t.Errorf("meta %+v, cause %q", m, m.LossCause())
	}
	// The scripts make {ns}:meta with loss_ms = created_ms.
	if m := parseMeta(map[string]string{"generation": "g", "created_ms": "1790000000000", "loss_ms": "1790000000000"}); m.LossCause() != LossCreated {
		t.Errorf("created: %+v, cause %q", m, m.LossCause())
	}
	// loss_ms 0: a store that lost nothing (coord.PrepareFresh, redistest.ForgetLoss).
	if m := parseMeta(map[string]string{"generation": "g", "created_ms": "1790000000000", "server": "", "loss_ms": "0"}); !m.LossAt.IsZero() || m.LossCause() != "" {
		t.Errorf("no loss: %+v, cause %q", m, m.LossCause())
	}
}

func TestParseStates(t *testing.T) {
	got, err := ParseStates("live, EXPIRED,live")
	if err != nil || !slices.Equal(got, []State{Live, Expired}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseStates("live,dead"); err == nil || !strings.Contains(err.Error(), "live, expired, released, orphan, conflict") {
		t.Fatalf("bad state: %v", err)
	}
}

func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond: "850ms", 8500 * time.Millisecond: "8.5s", 42 * time.Second: "42s",
		4*time.Minute + 10*time.Second: "4m10s", 3*time.Hour + 5*time.Minute: "3h5m", 12*24*time.Hour + 3*time.Hour: "12d3h",
	} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
	if group(65535) != "65,535" || group(1234567) != "1,234,567" || group(12) != "12" {
		t.Error("group")
	}
}
