package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// cloneBase is the fleet fixture without its own inconsistencies: live
// leases 0 (web-1, tokA) and 12 (web-4, tokD), 1 expired (web-2, tokB).
func cloneBase() *fixture {
	f := fleetFixture()
	delete(f.s.Records, 3)
	delete(f.s.Records, 7)
	return f
}

// liveOwner adds a live lease on machine ID id held by token, with owner
// data naming host and pid and the state-file node.
func (f *fixture) liveOwner(id int, host, pid, addr, token, node string) {
	o := owner(host, pid, addr, "v1.3.0", "flake", token, "live", time.Second, time.Hour, time.Hour, f.tick(time.Hour))
	o["node"] = node
	f.s.Records[id] = &Record{MachineID: id, Registered: true, Lease: token, LeaseTTL: 9 * time.Second,
		Owner: o, Reserved: f.tick(-2 * time.Second), HasReserved: true}
}

const node1, node2 = "0123abcd4567ef89", "fedc0987ba654321"

// Two live processes under one state-file node ID are one finding naming
// both (host, pid, addr, token) and every machine ID they hold, and those
// IDs are in conflict; one process with k IDs, different nodes, no node,
// a node whose other lease expired, or a lease being taken over by a
// restart from the same state file are not a clone.
func TestVerify_Clone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		want  []string // substrings of the one clone finding; nil: none
		ids   []int
	}{
		{"two processes, one node", func(f *fixture) {
			f.s.Records[0].Owner["node"] = node1
			f.s.Records[12].Owner["node"] = node1
		}, []string{"machine IDs 0 and 12: held by two live processes started from copies of one state file (node " + node1 + "): " +
			"web-1 pid 4242 addr 10.0.0.1:7379 token aaaa1111 (machine ID 0) and web-4 pid 88 addr 10.0.0.4:7379 token dddd3333 (machine ID 12); " +
			"give one of them a state file of its own"}, []int{0, 12}},
		{"one of them with two IDs", func(f *fixture) {
			f.s.Records[0].Owner["node"] = node1
			f.liveOwner(20, "web-9", "1", "10.0.0.9:7379", tokE, node1)
			f.liveOwner(21, "web-9", "1", "10.0.0.9:7379", tokE, node1)
		}, []string{"machine IDs 0, 20 and 21: held by two live processes", "web-1 pid 4242 addr 10.0.0.1:7379 token aaaa1111 (machine ID 0) and " +
			"web-9 pid 1 addr 10.0.0.9:7379 token eeee7777 (machine IDs 20 and 21)"}, []int{0, 20, 21}},
		{"three processes", func(f *fixture) {
			f.s.Records[0].Owner["node"] = node1
			f.s.Records[12].Owner["node"] = node1
			f.liveOwner(20, "web-9", "1", "10.0.0.9:7379", tokE, node1)
		}, []string{"machine IDs 0, 12 and 20: held by three live processes", "(machine ID 12) and web-9 pid 1",
			"give all but one of them a state file of their own"}, []int{0, 12, 20}},
		{"different nodes", func(f *fixture) {
			f.s.Records[0].Owner["node"] = node1
			f.s.Records[12].Owner["node"] = node2
		}, nil, nil},
		{"no node (no state file)", func(f *fixture) {
			f.s.Records[0].Owner["node"] = ""
			f.s.Records[12].Owner["node"] = ""
		}, nil, nil},
		{"one process with two IDs", func(f *fixture) {
			f.liveOwner(20, "web-9", "1", "10.0.0.9:7379", tokE, node1)
			f.liveOwner(21, "web-9", "1", "10.0.0.9:7379", tokE, node1)
		}, nil, nil},
		{"the other lease expired", func(f *fixture) {
			f.s.Records[0].Owner["node"] = node1
			f.s.Records[1].Owner["node"] = node1 // expired: owner data says live, no lease
		}, nil, nil},
		{"restart taking its old lease over", func(f *fixture) {
			// web-1 restarted from its state file (token tokA) as web-1b:
			// it took 20 over and is taking 0 next; 0's old lease is
			// fenced at its next renewal, or runs out.
			f.s.Records[0].Owner["node"] = node1
			f.liveOwner(20, "web-1", "5000", "10.0.0.1:7379", tokE, node1)
			f.s.Records[20].Owner["from_token"] = tokA
		}, nil, nil},
		{"a third process besides a takeover", func(f *fixture) {
			f.s.Records[0].Owner["node"] = node1
			f.liveOwner(20, "web-1", "5000", "10.0.0.1:7379", tokE, node1)
			f.s.Records[20].Owner["from_token"] = tokA
			f.s.Records[12].Owner["node"] = node1
		}, []string{"machine IDs 12 and 20: held by two live processes", "web-4 pid 88", "web-1 pid 5000"}, []int{12, 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cloneBase()
			tc.setup(f)
			rep := Build(f.s)
			var got []Finding
			for _, fd := range rep.Findings {
				if fd.Check == CheckClone {
					got = append(got, fd)
				}
			}
			if tc.want == nil {
				if len(got) > 0 || !rep.Consistent() {
					t.Fatalf("reported: %v", rep.Findings)
				}
				return
			}
			if len(got) != 1 || len(rep.Findings) != 1 || rep.Consistent() {
				t.Fatalf("want one clone finding (one line per node ID), got %v", rep.Findings)
			}
			line := got[0].String()
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("finding\n%s\ndoes not say\n%s", line, w)
				}
			}
			if got[0].MachineID != nil || !slices.Equal(got[0].MachineIDs, tc.ids) {
				t.Errorf("finding about machine ID %v / IDs %v, want IDs %v", got[0].MachineID, got[0].MachineIDs, tc.ids)
			}
			for _, m := range rep.Machines {
				inClone := slices.Contains(tc.ids, m.MachineID)
				if inClone && (m.State != Conflict || len(m.Problems) != 1 || m.Problems[0] != got[0].Message) {
					t.Errorf("machine ID %d: state %v, problems %q; want conflict with the clone", m.MachineID, m.State, m.Problems)
				}
				if !inClone && m.State == Conflict {
					t.Errorf("machine ID %d is in conflict, not in the clone", m.MachineID)
				}
			}
			if rep.Summary.Counts[Conflict] != len(tc.ids) {
				t.Errorf("summary counts %v, want %d in conflict", rep.Summary.Counts, len(tc.ids))
			}
		})
	}
}

// A lease whose owner data names another token is that finding, not a
// clone: the owner data (and its node ID) may be another process's.
func TestVerify_Clone_TokenMismatchIsNotAClone(t *testing.T) {
	f := cloneBase()
	f.s.Records[0].Owner["node"] = node1
	f.s.Records[12].Owner["node"] = node1
	f.s.Records[12].Owner["token"] = tokA
	rep := Build(f.s)
	if len(rep.Findings) != 1 || rep.Findings[0].Check != CheckOwnerTokenMismatch {
		t.Fatalf("findings %v, want only %s", rep.Findings, CheckOwnerTokenMismatch)
	}
}

// The table shows a clone's IDs as conflicts with the finding under the
// table, once; JSON carries it with every machine ID; history lists it as
// the ID's problem.
func TestVerify_Clone_TableJSONHistory(t *testing.T) {
	f := cloneBase()
	f.s.Records[0].Owner["node"] = node1
	f.s.Records[12].Owner["node"] = node1
	rep := Build(f.s)

	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{
		"\n0    conflict  web-1", "\n12   conflict  web-4",
		"2 conflict; ", "; 1 inconsistency:\nmachine IDs 0 and 12: held by two live processes started from copies of one state file (node " + node1 + ")",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	if strings.Count(out, "copies of one state file") != 1 {
		t.Errorf("the clone is not one line under the table:\n%s", out)
	}

	b.Reset()
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Machines []struct {
			MachineID int `json:"machine_id"`
			State     string
			Owner     struct{ Node string }
		}
		Findings []struct {
			MachineID  *int  `json:"machine_id"`
			MachineIDs []int `json:"machine_ids"`
			Check      string
			Message    string
		}
	}
	if err := json.Unmarshal(b.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Findings) != 1 || js.Findings[0].Check != "clone" || js.Findings[0].MachineID != nil ||
		!slices.Equal(js.Findings[0].MachineIDs, []int{0, 12}) || !strings.Contains(js.Findings[0].Message, "web-4 pid 88") {
		t.Errorf("JSON findings %+v", js.Findings)
	}
	for _, m := range js.Machines {
		if m.MachineID == 0 && (m.State != "conflict" || m.Owner.Node != node1) {
			t.Errorf("JSON machine 0: %+v", m)
		}
	}
	if strings.Contains(b.String(), tokA) {
		t.Error("JSON holds a whole owner token")
	}

	b.Reset()
	if err := WriteHistory(&b, HistoryOf(f.s, 12)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "now: conflict, owner web-4 pid 88") ||
		!strings.Contains(b.String(), "\nproblem: held by two live processes started from copies of one state file") {
		t.Errorf("history of 12:\n%s", b.String())
	}
}
