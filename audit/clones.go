package audit

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/flaked/flaked/contract"
)

// CheckClone: live leases under different tokens whose owners share a
// state-file node ID. Every claim makes a new token, and a node ID is made
// once per state file and copied with it, so these processes run from
// copies of one state file (a copied data directory, a restored VM or
// volume snapshot). The fencing keeps their IDs apart (claim.lua,
// renew.lua); the operator must still give one of them a state file of its
// own, or the next restart of either takes the other's machine IDs over
// again. One finding per node ID names every process and machine ID.
const CheckClone = "clone"

// clone is one node ID whose state file runs in several live processes.
type clone struct {
	node  string
	procs []cloneProc // by lowest machine ID
}

// cloneProc is one of them: an owner and the machine IDs it holds.
type cloneProc struct {
	owner Owner
	ids   []int
}

// ids are every machine ID the clone's processes hold, ascending.
func (c clone) ids() []int {
	var out []int
	for _, p := range c.procs {
		out = append(out, p.ids...)
	}
	slices.Sort(out)
	return out
}

// message names every process and its machine IDs.
func (c clone) message() string {
	var names []string
	for _, p := range c.procs {
		names = append(names, fmt.Sprintf("%s (%s %s)", p.owner.String(),
			plural(len(p.ids), "machine ID", "machine IDs"), joinAnd(p.ids)))
	}
	fix := "give one of them a state file of its own"
	if len(c.procs) > 2 {
		fix = "give all but one of them a state file of their own"
	}
	return fmt.Sprintf("held by %s live processes started from copies of one state file (node %s): %s; %s",
		count(len(c.procs)), c.node, joinAnd(names), fix)
}

// clones finds CheckClone, by node ID. One process holding k machine IDs
// holds them under one token, and a lease that ran out is no process any
// more: neither is a clone.
//
// A lease whose token another live owner of the node presented from its
// state file (that owner's from_token) is not counted: that owner took
// one of its IDs over, so its holder loses it at its next renewal (renew.lua
// fences it), or it is a crashed process's lease running out. A restart
// passes through this for a moment, and a copy on its way to being fenced
// too; what stays after the fencing is two tokens, and that is reported.
func clones(s *Snapshot) []clone {
	type proc struct {
		owner Owner
		ids   []int
		from  string
	}
	byNode := map[string]map[string]*proc{} // node ID -> lease token -> process
	for _, r := range s.sortedRecords() {
		// A lease whose owner data names another token is reported as
		// such; its node ID may be another process's.
		if r.Lease == "" || r.Owner == nil || r.Owner[contract.OwnerNode] == "" || r.Owner[contract.OwnerToken] != r.Lease {
			continue
		}
		node := r.Owner[contract.OwnerNode]
		if byNode[node] == nil {
			byNode[node] = map[string]*proc{}
		}
		p := byNode[node][r.Lease]
		if p == nil {
			p = &proc{owner: *ownerOf(r.Owner), from: r.Owner[contract.OwnerFromToken]}
			byNode[node][r.Lease] = p
		}
		p.ids = append(p.ids, r.MachineID)
	}
	var out []clone
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		procs := byNode[node]
		superseded := map[string]bool{}
		for tok, p := range procs {
			if p.from != "" && p.from != tok && procs[p.from] != nil {
				superseded[p.from] = true
			}
		}
		c := clone{node: node}
		for tok, p := range procs {
			if !superseded[tok] {
				c.procs = append(c.procs, cloneProc{owner: p.owner, ids: p.ids})
			}
		}
		if len(c.procs) < 2 {
			continue
		}
		slices.SortFunc(c.procs, func(a, b cloneProc) int { return a.ids[0] - b.ids[0] })
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b clone) int { return a.ids()[0] - b.ids()[0] })
	return out
}

// joinAnd is "3", "3 and 7", "3, 7 and 9".
func joinAnd[T any](items []T) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprint(it)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// count is a small number in words.
func count(n int) string {
	if w := []string{"no", "one", "two", "three", "four"}; n >= 0 && n < len(w) {
		return w[n]
	}
	return strconv.Itoa(n)
}
