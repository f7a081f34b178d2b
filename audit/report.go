package audit

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flaked/flaked/contract"
)

// State is what a machine ID's keys say about it.
type State string

// States of a machine ID.
const (
	// Live: a lease key holds the owner's token.
	Live State = "live"
	// Expired: the owner data says live but the lease is gone: the owner
	// stopped renewing (a crash, kill -9, a pause or a partition) and the
	// lease ran out.
	Expired State = "expired"
	// Released: the owner gave the ID back on a clean stop.
	Released State = "released"
	// Orphan: registered in {ns}:machines without owner data or lease.
	Orphan State = "orphan"
	// Conflict: anything inconsistent; the Findings say what.
	Conflict State = "conflict"
)

// States lists every State, in the order reports count them.
var States = []State{Live, Expired, Released, Orphan, Conflict}

// ParseStates reads a comma-separated list of states ("live,expired").
func ParseStates(s string) ([]State, error) {
	var out []State
	for _, f := range strings.Split(s, ",") {
		st := State(strings.TrimSpace(strings.ToLower(f)))
		if !slices.Contains(States, st) {
			return nil, fmt.Errorf("state %q: want a comma-separated list of %s", f, joinStates(States))
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

func joinStates(s []State) string {
	var out []string
	for _, st := range s {
		out = append(out, string(st))
	}
	return strings.Join(out, ", ")
}

// Report is the audit of one namespace at one moment.
type Report struct {
	Namespace string    `json:"namespace"`
	Layout    string    `json:"layout"`
	Now       time.Time `json:"now"`
	// Filter is the states shown (empty: all).
	Filter   []State   `json:"filter,omitempty"`
	Machines []Machine `json:"machines"`
	Summary  Summary   `json:"summary"`
	// Findings are the inconsistencies; a consistent registry has none.
	Findings []Finding `json:"findings"`
	// History says how far back the event stream reaches.
	History HistoryInfo `json:"history"`
	// Server is the identity (run_id:master_replid) of the Redis server
	// that last wrote the registry ({ns}:meta).
	Server string `json:"server,omitempty"`
	// DataLoss is the last moment Redis may have lost acknowledged writes
	// (nil when it recorded none): claims started after it wait a horizon.
	DataLoss *DataLoss `json:"last_possible_data_loss,omitempty"`
}

// DataLoss is a moment Redis may have lost acknowledged writes.
type DataLoss struct {
	At time.Time `json:"at"`
	// Cause is LossServer (Redis restarted or failed over) or LossCreated
	// (the registry was made anew).
	Cause string `json:"cause"`
}

// Machine is one row of the audit table.
type Machine struct {
	MachineID int    `json:"machine_id"`
	State     State  `json:"state"`
	Owner     *Owner `json:"owner,omitempty"`
	Mode      string `json:"mode,omitempty"`
	// LeaseTTLMs is the time the lease has left (-1: never expires).
	LeaseTTLMs     *int64     `json:"lease_ttl_ms,omitempty"`
	Heartbeat      *time.Time `json:"heartbeat,omitempty"`
	HeartbeatAgeMs *int64     `json:"heartbeat_age_ms,omitempty"`
	// ReservedTick is the highest tick the ID's owners may have used;
	// ReservedTime is the start of that tick.
	ReservedTick *int64     `json:"reserved_tick,omitempty"`
	ReservedTime *time.Time `json:"reserved_time,omitempty"`
	FirstClaim   *time.Time `json:"first_claim,omitempty"`
	LastClaim    *time.Time `json:"last_claim,omitempty"`
	// Problems are this ID's findings (state conflict).
	Problems []string `json:"problems,omitempty"`
}

// Summary counts the machine IDs.
type Summary struct {
	Listed int           `json:"listed"`
	Counts map[State]int `json:"counts"`
	// Leasable is how many machine IDs the layout has for flake mode
	// (2^bits - 1: the last one is counter mode's); 0 when the layout is
	// unknown.
	Leasable int `json:"leasable"`
	Leased   int `json:"leased"`
	// Free is how many leasable IDs have no lease now: what is left.
	Free int `json:"free"`
	// NeverUsed is how many leasable IDs no key names.
	NeverUsed int `json:"never_used"`
	// Pruned is how many IDs only keep a reservation (audit prune forgot
	// their owner data, and left the reservation that protects them).
	Pruned int `json:"pruned"`
}

// HistoryInfo says how far back the event stream reaches.
type HistoryInfo struct {
	Events int `json:"events"`
	// Complete: no event was ever trimmed from the stream.
	Complete bool       `json:"complete"`
	Oldest   *time.Time `json:"oldest,omitempty"`
}

// Finding is one inconsistency.
type Finding struct {
	// MachineID is the ID it is about; nil for the registry as a whole,
	// and for a finding about several IDs at once (MachineIDs).
	MachineID *int `json:"machine_id,omitempty"`
	// MachineIDs are the IDs of a finding about several of them together
	// (CheckClone: every ID the processes of one state file hold).
	MachineIDs []int  `json:"machine_ids,omitempty"`
	Check      string `json:"check"`
	Message    string `json:"message"`
}

// String is the finding as one line.
func (f Finding) String() string {
	switch {
	case f.MachineID != nil:
		return fmt.Sprintf("machine ID %d: %s", *f.MachineID, f.Message)
	case len(f.MachineIDs) > 0:
		return fmt.Sprintf("machine IDs %s: %s", joinAnd(f.MachineIDs), f.Message)
	}
	return "registry: " + f.Message
}

// Build turns a snapshot into a report, measuring ages from s.Now.
func Build(s *Snapshot) *Report {
	rep := &Report{
		Namespace: s.Namespace,
		Layout:    s.LayoutText,
		Now:       s.Now,
		Findings:  []Finding{},
		Machines:  []Machine{},
		History:   historyInfo(s),
		Summary:   Summary{Counts: map[State]int{}},
		Server:    s.Meta.Server,
	}
	if c := s.Meta.LossCause(); c != "" {
		rep.DataLoss = &DataLoss{At: s.Meta.LossAt, Cause: c}
	}
	for _, st := range States {
		rep.Summary.Counts[st] = 0
	}
	lb, back := issuedBounds(s)
	// A clone is one finding naming all its machine IDs, and each of
	// those IDs is in conflict.
	cl := clones(s)
	inClone := map[int][]problem{}
	for _, c := range cl {
		for _, id := range c.ids() {
			inClone[id] = append(inClone[id], problem{CheckClone, c.message()})
		}
	}
	named := 0
	for _, r := range s.sortedRecords() {
		problems := recordProblems(s, r, lb[r.MachineID], back[r.MachineID])
		for _, p := range problems {
			id := r.MachineID
			rep.Findings = append(rep.Findings, Finding{MachineID: &id, Check: p.check, Message: p.msg})
		}
		problems = append(problems, inClone[r.MachineID]...)
		if s.Layout.BitsTime != 0 && r.MachineID >= s.Layout.MinMachineID() && r.MachineID <= s.Layout.MaxMachineID() {
			named++
			if r.Lease != "" {
				rep.Summary.Leased++
			}
		}
		if !r.Registered && r.Lease == "" && r.Owner == nil && len(problems) == 0 {
			rep.Summary.Pruned++
			continue
		}
		m := machineRow(s, r, problems)
		rep.Summary.Listed++
		rep.Summary.Counts[m.State]++
		rep.Machines = append(rep.Machines, m)
	}
	for _, id := range slices.Sorted(maps.Keys(back)) {
		if s.Records[id] == nil { // no key names it any more: only its events tell
			for _, p := range back[id] {
				rep.Findings = append(rep.Findings, Finding{MachineID: &id, Check: p.check, Message: p.msg})
			}
		}
	}
	for _, c := range cl {
		rep.Findings = append(rep.Findings, Finding{MachineIDs: c.ids(), Check: CheckClone, Message: c.message()})
	}
	rep.Findings = append(rep.Findings, registryProblems(s, rep.Summary.Listed)...)
	if s.Layout.BitsTime != 0 {
		rep.Summary.Leasable = s.Layout.LeasableMachineIDs()
		rep.Summary.Free = rep.Summary.Leasable - rep.Summary.Leased
		rep.Summary.NeverUsed = rep.Summary.Leasable - named
	}
	return rep
}

// Consistent reports whether the registry has no findings.
func (r *Report) Consistent() bool { return len(r.Findings) == 0 }

// Only keeps the machines in one of the states (the summary still counts
// all of them).
func (r *Report) Only(states []State) {
	if len(states) == 0 {
		return
	}
	r.Filter = states
	kept := r.Machines[:0]
	for _, m := range r.Machines {
		if slices.Contains(states, m.State) {
			kept = append(kept, m)
		}
	}
	r.Machines = kept
}

func historyInfo(s *Snapshot) HistoryInfo {
	h := HistoryInfo{Events: len(s.Events), Complete: s.Stream.Complete}
	if len(s.Events) > 0 {
		t := s.Events[0].Time
		h.Oldest = &t
	}
	return h
}

func machineRow(s *Snapshot, r *Record, problems []problem) Machine {
	m := Machine{MachineID: r.MachineID, State: stateOf(r, problems), Owner: ownerOf(r.Owner)}
	for _, p := range problems {
		m.Problems = append(m.Problems, p.msg)
	}
	if r.Owner != nil {
		m.Mode = r.Owner[contract.OwnerMode]
		if hb, ok := msTime(r.Owner[contract.OwnerHeartbeat]); ok {
			m.Heartbeat = &hb
			age := s.Now.Sub(hb).Milliseconds()
			m.HeartbeatAgeMs = &age
		}
		if t, ok := msTime(r.Owner[contract.OwnerFirstClaim]); ok {
			m.FirstClaim = &t
		}
		if t, ok := msTime(r.Owner[contract.OwnerClaimed]); ok {
			m.LastClaim = &t
		}
	}
	// Claim times the owner data lacks (missing or pruned) come from the
	// events.
	for _, e := range s.eventsOf(r.MachineID) {
		if !e.isClaim() {
			continue
		}
		t := e.Time
		if m.FirstClaim == nil {
			m.FirstClaim = &t
		}
		if r.Owner == nil || r.Owner[contract.OwnerClaimed] == "" {
			m.LastClaim = &t
		}
	}
	if r.Lease != "" {
		ttl := r.LeaseTTL.Milliseconds()
		if r.LeaseTTL < 0 {
			ttl = -1
		}
		m.LeaseTTLMs = &ttl
	}
	if r.HasReserved {
		tick := r.Reserved
		m.ReservedTick = &tick
		if s.Layout.BitsTime != 0 {
			t := s.Layout.TickTime(tick)
			m.ReservedTime = &t
		}
	}
	return m
}

func stateOf(r *Record, problems []problem) State {
	switch {
	case len(problems) > 0:
		return Conflict
	case r.Lease != "":
		return Live
	case r.Owner == nil:
		return Orphan
	case r.Owner[contract.OwnerState] == contract.StateReleased:
		return Released
	default:
		return Expired
	}
}

func msTime(s string) (time.Time, bool) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms).UTC(), true
}
