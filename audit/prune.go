package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

var pruneScript = redis.NewScript(contract.Prune)

// ErrInvalidPrune is wrapped by bad PruneOptions.
var ErrInvalidPrune = errors.New("invalid prune options")

// PruneOptions configure Prune.
type PruneOptions struct {
	// OlderThan: an ID is forgotten only when its reservation ended more
	// than this long before Redis TIME. Must be > 0.
	OlderThan time.Duration
	// DryRun reports what would be forgotten and changes nothing.
	DryRun bool
	// Host and PID name the pruning process in the prune events; default
	// os.Hostname() and os.Getpid().
	Host string
	PID  int
	// Progress receives progress lines while the registry is read
	// (ReadOptions); nil: none.
	Progress io.Writer
}

// PruneResult says what Prune forgot and what it kept, and why.
type PruneResult struct {
	Namespace  string     `json:"namespace"`
	DryRun     bool       `json:"dry_run"`
	OlderThan  string     `json:"older_than"`
	Cutoff     time.Time  `json:"cutoff"`
	CutoffTick int64      `json:"cutoff_tick"`
	Pruned     []PrunedID `json:"pruned"`
	Kept       []KeptID   `json:"kept"`
}

// PrunedID is a machine ID Prune forgot (or would forget).
type PrunedID struct {
	MachineID    int       `json:"machine_id"`
	State        State     `json:"state"`
	Owner        *Owner    `json:"owner,omitempty"`
	ReservedTick int64     `json:"reserved_tick"`
	ReservedTime time.Time `json:"reserved_time"`
}

// KeptID is a machine ID Prune left alone.
type KeptID struct {
	MachineID int    `json:"machine_id"`
	State     State  `json:"state"`
	Reason    string `json:"reason"`
}

// Prune forgets released, expired and orphan machine IDs whose
// reservation ended more than OlderThan ago: it removes them from
// {ns}:machines and deletes their owner data, so the audit table and
// claims' random picks stop showing them, and writes a prune event for
// each. It never touches a live lease, an ID in conflict, or any
// reservation (see prune.lua for why keeping the reservation is what
// keeps IDs unique). Each ID is checked again atomically when forgotten.
func Prune(ctx context.Context, rdb redis.UniversalClient, ns string, o PruneOptions) (*PruneResult, error) {
	if o.OlderThan <= 0 {
		return nil, fmt.Errorf("%w: older than %v: must be > 0", ErrInvalidPrune, o.OlderThan)
	}
	s, k, c, err := read(ctx, rdb, ns, ReadOptions{Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	res, cands, err := planPrune(s, o.OlderThan)
	if err != nil || o.DryRun {
		if res != nil {
			res.DryRun = true
		}
		return res, err
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
	planned := res.Pruned
	res.Pruned = []PrunedID{}
	const batch = 500
	for start := 0; start < len(cands); start += batch {
		part := cands[start:min(len(cands), start+batch)]
		keys, argv := contract.PruneArgs{Keys: k, Cutoff: res.CutoffTick, Host: o.Host, PID: o.PID, IDs: part}.KeysArgv()
		v, err := pruneScript.Run(ctx, c, keys, argv...).StringSlice()
		if err != nil {
			return res, fmt.Errorf("prune machine IDs: %w", err)
		}
		for i := 0; i+1 < len(v); i += 2 {
			p := planned[start+i/2]
			switch v[i+1] {
			case "pruned":
				res.Pruned = append(res.Pruned, p)
			case "live":
				res.Kept = append(res.Kept, KeptID{p.MachineID, Live, "leased since the audit read the registry"})
			case "recent":
				res.Kept = append(res.Kept, KeptID{p.MachineID, p.State, "its reservation moved past the cutoff since the audit read the registry"})
			default:
				res.Kept = append(res.Kept, KeptID{p.MachineID, p.State, "its owner changed since the audit read the registry"})
			}
		}
	}
	return res, nil
}

// planPrune decides, from a snapshot, which machine IDs Prune forgets.
func planPrune(s *Snapshot, olderThan time.Duration) (*PruneResult, []contract.PruneID, error) {
	if s.Layout.BitsTime == 0 {
		return nil, nil, fmt.Errorf("%w: cannot tell reservation ages without the fleet layout (%s)", ErrNoLayout, orDash(s.LayoutErr))
	}
	cutoff := s.Now.Add(-olderThan)
	res := &PruneResult{
		Namespace: s.Namespace, OlderThan: olderThan.String(), Cutoff: cutoff,
		// A reservation below this tick ended at or before the cutoff.
		CutoffTick: s.Layout.Tick(cutoff),
		Pruned:     []PrunedID{}, Kept: []KeptID{},
	}
	var cands []contract.PruneID
	rep := Build(s)
	for _, m := range rep.Machines {
		r := s.Records[m.MachineID]
		keep := func(reason string) { res.Kept = append(res.Kept, KeptID{m.MachineID, m.State, reason}) }
		switch {
		case m.State == Live:
			keep("live lease")
		case m.State == Conflict:
			keep("in conflict: inspect it first (flaked audit verify)")
		case !r.HasReserved:
			keep("no reservation: its age is unknown")
		case r.Reserved >= res.CutoffTick:
			keep(fmt.Sprintf("reservation (tick %d, %s) is newer than the cutoff", r.Reserved, fmtTimeMs(s.Layout.TickTime(r.Reserved))))
		default:
			res.Pruned = append(res.Pruned, PrunedID{MachineID: m.MachineID, State: m.State, Owner: m.Owner,
				ReservedTick: r.Reserved, ReservedTime: s.Layout.TickTime(r.Reserved)})
			token := ""
			if r.Owner != nil {
				token = r.Owner[contract.OwnerToken]
			}
			cands = append(cands, contract.PruneID{MachineID: m.MachineID, Token: token})
		}
	}
	return res, cands, nil
}

// WritePrune writes what was forgotten and kept.
func WritePrune(w io.Writer, r *PruneResult) error {
	ew := &errWriter{w: w}
	verb, head := "forgot", "forgot"
	if r.DryRun {
		verb, head = "would forget", "would forget (dry run)"
	}
	fmt.Fprintf(ew, "namespace %s: %s %d %s whose reservation ended before %s UTC (older than %s); reservations are kept\n",
		r.Namespace, head, len(r.Pruned), plural(len(r.Pruned), "machine ID", "machine IDs"), fmtTimeMs(r.Cutoff), r.OlderThan)
	tw := tabwriter.NewWriter(ew, 0, 8, 2, ' ', 0)
	for _, p := range r.Pruned {
		owner := "no owner data"
		if p.Owner != nil {
			owner = "owner " + p.Owner.String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\treservation %d (%s), %s\n", verb,
			p.MachineID, p.State, p.ReservedTick, fmtTimeMs(p.ReservedTime), owner)
	}
	for _, k := range r.Kept {
		fmt.Fprintf(tw, "kept\t%d\t%s\t%s\n", k.MachineID, k.State, k.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return ew.err
}
