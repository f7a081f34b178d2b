package audit

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CheckClone: live leases under different tokens whose owners share a
// state-file node ID. Every process makes its own token, and a node ID is
// made once per state file, so these processes run from copies of one
// state file (a copied data directory, a restored VM or volume snapshot).
// The fencing keeps their IDs apart (claim.lua, renew.lua); the operator
// must still give one of them a state file of its own, or the next
// restart of either takes the other's machine IDs over again.
const CheckClone = "clone"

// cloneProblems finds the processes of CheckClone, by machine ID.
func cloneProblems(s *Snapshot) map[int][]problem {
	type proc struct {
		owner string
		ids   []int
	}
	byNode := map[string]map[string]*proc{} // node -> token -> process
	for _, r := range s.sortedRecords() {
		if r.Lease == "" || r.Owner == nil || r.Owner["node"] == "" || r.Owner["token"] != r.Lease {
			continue
		}
		node := r.Owner["node"]
		if byNode[node] == nil {
			byNode[node] = map[string]*proc{}
		}
		p := byNode[node][r.Lease]
		if p == nil {
			o := Owner{Host: r.Owner["host"], PID: atoi(r.Owner["pid"]), Addr: r.Owner["addr"], Token: shortToken(r.Lease)}
			p = &proc{owner: o.String()}
			byNode[node][r.Lease] = p
		}
		p.ids = append(p.ids, r.MachineID)
	}
	out := map[int][]problem{}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		procs := byNode[node]
		if len(procs) < 2 {
			continue
		}
		var names []string
		for _, tok := range slices.Sorted(maps.Keys(procs)) {
			p := procs[tok]
			names = append(names, fmt.Sprintf("%s (machine IDs %s)", p.owner, joinIDs(p.ids)))
		}
		msg := fmt.Sprintf("held by %d live processes started from copies of one state file (node %s): %s; give one of them a state file of its own",
			len(procs), node, strings.Join(names, ", "))
		for _, p := range procs {
			for _, id := range p.ids {
				out[id] = append(out[id], problem{CheckClone, msg})
			}
		}
	}
	return out
}

func joinIDs(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}
