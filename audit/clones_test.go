package audit

import (
	"strings"
	"testing"
)

// Two live processes under one state-file node ID are reported, naming
// both, and their machine IDs are in conflict; one process with k IDs,
// different nodes, or a node whose other lease expired are not.
func TestVerify_Clone(t *testing.T) {
	base := func() *fixture {
		f := fleetFixture()
		delete(f.s.Records, 3) // the fixture's own inconsistencies
		delete(f.s.Records, 7)
		return f
	}
	for _, tc := range []struct {
		name  string
		nodes map[int]string // machine ID -> owner's node
		brk   func(f *fixture)
		want  bool
	}{
		{"two processes, one node", map[int]string{0: "n1", 12: "n1"}, nil, true},
		{"different nodes", map[int]string{0: "n1", 12: "n2"}, nil, false},
		{"no node (no state file)", map[int]string{0: "", 12: ""}, nil, false},
		{"one process with two IDs", map[int]string{0: "n1", 12: "n1"}, func(f *fixture) {
			f.s.Records[12].Lease, f.s.Records[12].Owner["token"] = tokA, tokA
		}, false},
		{"the other lease expired", map[int]string{0: "n1", 1: "n1"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			for id, n := range tc.nodes {
				f.s.Records[id].Owner["node"] = n
			}
			if tc.brk != nil {
				tc.brk(f)
			}
			rep := Build(f.s)
			var lines []string
			for _, fd := range rep.Findings {
				if fd.Check == CheckClone {
					lines = append(lines, fd.String())
				}
			}
			if !tc.want {
				if len(lines) > 0 || !rep.Consistent() {
					t.Fatalf("reported: %v", rep.Findings)
				}
				return
			}
			if len(lines) != 2 || rep.Consistent() {
				t.Fatalf("want one finding on each of the two machine IDs, got %v", rep.Findings)
			}
			for _, want := range []string{"web-1 pid 4242", "web-4 pid 88", "node n1", "copies of one state file"} {
				if !strings.Contains(lines[0], want) {
					t.Errorf("finding %q does not name %q", lines[0], want)
				}
			}
			for _, m := range rep.Machines {
				if (m.MachineID == 0 || m.MachineID == 12) && m.State != Conflict {
					t.Errorf("machine ID %d: state %v, want conflict", m.MachineID, m.State)
				}
			}
		})
	}
}
