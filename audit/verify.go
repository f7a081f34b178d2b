package audit

import (
	"fmt"
	"strings"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
)

// Checks of a registry. Each finding names one; docs/design.md's registry
// invariants are what they test.
const (
	CheckLeaseNotRegistered   = "lease-not-registered"
	CheckLeaseWithoutOwner    = "lease-without-owner"
	CheckLiveNoReservation    = "live-without-reservation"
	CheckReservationBelowUsed = "reservation-below-issued"
	CheckLayoutMissing        = "layout-missing"
	CheckLayoutInvalid        = "layout-invalid"
	CheckMetaMissing          = "meta-missing"
	CheckOwnerTokenMismatch   = "owner-token-mismatch"
	CheckLeaseWithoutTTL      = "lease-without-ttl"
	CheckReleasedButLeased    = "released-but-leased"
	CheckUnknownOwnerState    = "unknown-owner-state"
	CheckOwnerNotRegistered   = "owner-not-registered"
	CheckBadMachineID         = "bad-machine-id"
	CheckStrayKey             = "stray-key"
	CheckHistoryWentBack      = "history-went-back"
)

type problem struct{ check, msg string }

// bound is the highest tick the events say an owner of a machine ID used
// or may have used, and the event that says so.
type bound struct {
	tick  int64
	event *Event
}

// issuedBounds: a release records the last tick its owner used; a claim's
// floor is the previous owners' reservation, ticks up to which may have
// been issued. The reservation must never go below either afterwards:
// claims only raise it, and a release sets it to max(last tick, floor).
// So, per machine ID, these values never decrease in stream order either;
// where one does, a claim started (or a release ended) below ticks already
// used, and the IDs between may have been issued twice: those are the
// regressions.
func issuedBounds(s *Snapshot) (map[int]bound, map[int][]problem) {
	out := map[int]bound{}
	back := map[int][]problem{}
	for i := range s.Events {
		e := &s.Events[i]
		if e.MachineID < 0 {
			continue
		}
		var field string
		switch {
		case e.isClaim():
			field = contract.FieldFloor
		case e.Type == contract.EventRelease:
			field = contract.FieldLast
		default:
			continue
		}
		t, ok := e.Int(field)
		if !ok {
			continue
		}
		b, seen := out[e.MachineID]
		switch {
		case !seen || t > b.tick:
			out[e.MachineID] = bound{tick: t, event: e}
		case t < b.tick:
			what := fmt.Sprintf("the %s at %s by %s started after tick %d", e.Type, fmtTimeMs(e.Time), e.Owner().String(), t)
			if e.Type == contract.EventRelease {
				what = fmt.Sprintf("the release at %s by %s recorded last tick %d", fmtTimeMs(e.Time), e.Owner().String(), t)
			}
			back[e.MachineID] = append(back[e.MachineID], problem{CheckHistoryWentBack,
				fmt.Sprintf("%s, below tick %d of the %s at %s: IDs with ticks %d..%d may have been issued twice",
					what, b.tick, b.event.Type, fmtTimeMs(b.event.Time), t+1, b.tick)})
		}
	}
	return out, back
}

// recordProblems are the inconsistencies of one machine ID.
func recordProblems(s *Snapshot, r *Record, lb bound, back []problem) []problem {
	out := append([]problem(nil), back...)
	add := func(check, format string, a ...any) {
		out = append(out, problem{check, fmt.Sprintf(format, a...)})
	}
	if l := s.Layout; l.BitsTime != 0 {
		switch {
		case r.MachineID == l.CounterMachineID():
			add(CheckBadMachineID, "is the counter-mode machine ID (%s): it must never be registered or leased", counterName(l))
		case r.MachineID < l.MinMachineID() || r.MachineID > l.CounterMachineID():
			add(CheckBadMachineID, "is outside the layout's machine IDs %d..%d%s", l.MinMachineID(), l.MaxMachineID(), regionNote(l))
		}
	}
	if r.Lease != "" {
		if !r.Registered {
			add(CheckLeaseNotRegistered, "leased (token %s) but not a member of %s", shortToken(r.Lease), s.keys().Machines)
		}
		switch {
		case r.Owner == nil:
			add(CheckLeaseWithoutOwner, "leased (token %s) but %s is missing", shortToken(r.Lease), s.ownerKey(r.MachineID))
		case r.Owner[contract.OwnerToken] == "":
			// renew.lua writes heartbeat and mode into the owner hash even
			// when the rest of it is gone.
			add(CheckLeaseWithoutOwner, "leased (token %s) but %s is incomplete: no token or host (only renewals' heartbeat and mode are left)",
				shortToken(r.Lease), s.ownerKey(r.MachineID))
		default:
			if t := r.Owner[contract.OwnerToken]; t != r.Lease {
				add(CheckOwnerTokenMismatch, "lease token %s differs from the owner data's token %s", shortToken(r.Lease), orDash(shortToken(t)))
			}
			if r.Owner[contract.OwnerState] == contract.StateReleased {
				add(CheckReleasedButLeased, "owner data says released but the lease key is present")
			}
		}
		if !r.HasReserved {
			add(CheckLiveNoReservation, "leased but has no reservation in %s", s.keys().Reserved)
		}
		if r.LeaseTTL < 0 {
			add(CheckLeaseWithoutTTL, "lease key has no expiry: the ID would never be freed")
		}
	} else if r.Owner != nil {
		if !r.Registered {
			add(CheckOwnerNotRegistered, "has owner data but is not a member of %s", s.keys().Machines)
		}
		if st := r.Owner[contract.OwnerState]; st != contract.StateLive && st != contract.StateReleased {
			add(CheckUnknownOwnerState, "owner data has state %q, want live or released", st)
		}
	}
	if lb.event != nil {
		switch {
		case r.HasReserved && r.Reserved < lb.tick:
			add(CheckReservationBelowUsed, "reservation %d is below tick %d, %s: a new owner could issue ticks already used",
				r.Reserved, lb.tick, usedBy(lb.event))
		case !r.HasReserved && r.Lease == "" && s.Meta.UnknownFloor(s.Layout) < lb.tick:
			// (A leased ID without a reservation is reported above.)
			add(CheckReservationBelowUsed, "has no reservation, but tick %d was used, %s: a new owner would start after tick %d",
				lb.tick, usedBy(lb.event), s.Meta.UnknownFloor(s.Layout))
		}
	}
	return out
}

// usedBy says which event recorded a bound: written only for a finding,
// not for each of 60,000 consistent IDs.
func usedBy(e *Event) string {
	if e.isClaim() {
		return fmt.Sprintf("the floor of the %s at %s (previous owners may have issued up to it)", e.Type, fmtTimeMs(e.Time))
	}
	return fmt.Sprintf("which the %s at %s recorded as its last tick", e.Type, fmtTimeMs(e.Time))
}

// registryProblems are the findings about the namespace as a whole.
func registryProblems(s *Snapshot, listed int) []Finding {
	var out []Finding
	add := func(check, format string, a ...any) {
		out = append(out, Finding{Check: check, Message: fmt.Sprintf(format, a...)})
	}
	registered := 0
	for _, r := range s.Records {
		if r.Registered {
			registered++
		}
	}
	switch {
	case s.LayoutText == "" && registered > 0:
		add(CheckLayoutMissing, "%d machine IDs are registered but %s is missing: a node with any layout could claim them", registered, s.keys().Layout)
	case s.LayoutErr != "":
		add(CheckLayoutInvalid, "%s is unreadable: %s", s.keys().Layout, s.LayoutErr)
	}
	if !s.Meta.Present && registered > 0 {
		add(CheckMetaMissing, "%s is missing while %d machine IDs are registered: Redis lost part of its data, or it was deleted", s.keys().Meta, registered)
	}
	for _, st := range s.Strays {
		add(CheckStrayKey, "%s names no machine ID", quoteStray(st))
	}
	return out
}

func quoteStray(s string) string {
	if strings.HasPrefix(s, "reservation of ") {
		return s
	}
	return fmt.Sprintf("%q (a member, field or key suffix)", s)
}

// counterName is how findings name the counter machine ID: 2^bits-1, or
// the last of its region.
func counterName(l flake.Layout) string {
	if l.BitsRegion == 0 {
		return fmt.Sprintf("2^%d-1", l.BitsMachineID)
	}
	return fmt.Sprintf("%d, the last of region %d", l.CounterMachineID(), l.Region)
}

// regionNote names the region of a layout with regions: its registry
// leases only the region's machine IDs.
func regionNote(l flake.Layout) string {
	if l.BitsRegion == 0 {
		return ""
	}
	return fmt.Sprintf(" (region %d of %d)", l.Region, l.Regions())
}
