package audit

import (
	"strings"
	"testing"
	"time"
)

// TestVerify_EachCheck breaks one consistent registry in one way each and
// expects exactly that check to fire.
func TestVerify_EachCheck(t *testing.T) {
	consistent := func() *fixture {
		f := fleetFixture()
		delete(f.s.Records, 3) // the fixture's own inconsistencies
		delete(f.s.Records, 7)
		return f
	}
	if rep := Build(consistent().s); !rep.Consistent() {
		t.Fatalf("base fixture not consistent: %v", rep.Findings)
	}
	for _, tc := range []struct {
		check string
		want  string
		brk   func(f *fixture)
	}{
		{CheckLeaseNotRegistered, "machine ID 0: leased (token aaaa1111) but not a member of {flaked}:machines",
			func(f *fixture) { f.s.Records[0].Registered = false }},
		{CheckLeaseWithoutOwner, "machine ID 0: leased (token aaaa1111) but {flaked}:owner:0 is missing",
			func(f *fixture) { f.s.Records[0].Owner = nil }},
		{CheckLiveNoReservation, "machine ID 0: leased but has no reservation in {flaked}:reserved",
			func(f *fixture) { f.s.Records[0].HasReserved = false }},
		{CheckReservationBelowUsed, "machine ID 2: reservation 5782679999 is below tick 5782680000, which the release at 2026-11-01 07:00:00.000 recorded as its last tick",
			func(f *fixture) { f.s.Records[2].Reserved-- }},
		{CheckReservationBelowUsed, "machine ID 1: reservation 5775120099 is below tick 5775120100, the floor of the takeover at 2026-10-31 10:00:00.000",
			func(f *fixture) { f.s.Records[1].Reserved = 5775120099 }},
		{CheckReservationBelowUsed, "machine ID 2: has no reservation, but tick 5782680000 was used",
			func(f *fixture) { f.s.Records[2].HasReserved = false }},
		{CheckLayoutMissing, "registry: 5 machine IDs are registered but {flaked}:layout is missing",
			func(f *fixture) { f.s.LayoutText, f.s.Layout.BitsTime = "", 0 }},
		{CheckLayoutInvalid, "registry: {flaked}:layout is unreadable: bad",
			func(f *fixture) { f.s.LayoutText, f.s.LayoutErr, f.s.Layout.BitsTime = "x", "bad", 0 }},
		{CheckMetaMissing, "registry: {flaked}:meta is missing while 5 machine IDs are registered",
			func(f *fixture) { f.s.Meta = Meta{} }},
		{CheckOwnerTokenMismatch, "machine ID 0: lease token bbbb5555 differs from the owner data's token aaaa1111",
			func(f *fixture) { f.s.Records[0].Lease = tokB }},
		{CheckLeaseWithoutTTL, "machine ID 0: lease key has no expiry",
			func(f *fixture) { f.s.Records[0].LeaseTTL = -1 }},
		{CheckReleasedButLeased, "machine ID 0: owner data says released but the lease key is present",
			func(f *fixture) { f.s.Records[0].Owner["state"] = "released" }},
		{CheckUnknownOwnerState, `machine ID 1: owner data has state "zombie"`,
			func(f *fixture) { f.s.Records[1].Owner["state"] = "zombie" }},
		{CheckOwnerNotRegistered, "machine ID 2: has owner data but is not a member of {flaked}:machines",
			func(f *fixture) { f.s.Records[2].Registered = false }},
		{CheckBadMachineID, "machine ID 65535: is the counter-mode machine ID (2^16-1)",
			func(f *fixture) {
				f.s.Records[65535] = &Record{MachineID: 65535, Registered: true, Reserved: 1, HasReserved: true}
			}},
		{CheckBadMachineID, "machine ID 70000: is outside the layout's machine IDs 0..65534",
			func(f *fixture) {
				f.s.Records[70000] = &Record{MachineID: 70000, Registered: true, Reserved: 1, HasReserved: true}
			}},
		{CheckHistoryWentBack, "machine ID 1: the takeover at 2026-10-31 10:00:00.000 by web-2 pid 77 addr 10.0.0.2:7379 token bbbb5555 started after tick 5438160399, below tick 5438160400 of the claim at 2026-09-22 10:00:00.000: IDs with ticks 5438160400..5438160400 may have been issued twice",
			func(f *fixture) { f.s.Events[7].Fields.Set("floor", "5438160399") }},
		{CheckStrayKey, `registry: "abc" (a member, field or key suffix) names no machine ID`,
			func(f *fixture) { f.s.Strays = []string{"abc"} }},
	} {
		t.Run(tc.check, func(t *testing.T) {
			f := consistent()
			tc.brk(f)
			rep := Build(f.s)
			if rep.Consistent() || len(rep.Findings) != 1 || rep.Findings[0].Check != tc.check ||
				!strings.HasPrefix(rep.Findings[0].String(), tc.want) {
				t.Fatalf("findings %v\nwant one %s starting %q", rep.Findings, tc.check, tc.want)
			}
			if id := rep.Findings[0].MachineID; id != nil {
				for _, m := range rep.Machines {
					if m.MachineID == *id && m.State != Conflict {
						t.Errorf("machine ID %d with a finding is %s, want conflict", *id, m.State)
					}
				}
			}
		})
	}
}

func TestPlanPrune_NeverLiveNeverConflict_OnlyOld(t *testing.T) {
	f := fleetFixture()
	res, cands, err := planPrune(f.s, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var pruned []int
	for _, p := range res.Pruned {
		pruned = append(pruned, p.MachineID)
	}
	// 2 (released 3 h ago) and 5 (orphan, 35 days); not 1 (expired, but
	// reserved 43 s ago), not 0 and 12 (live: 12's reservation is a day
	// old, it is idle), not 3 and 7 (conflicts).
	if len(pruned) != 2 || pruned[0] != 2 || pruned[1] != 5 || len(cands) != 2 || cands[0].Token != tokC || cands[1].Token != "" {
		t.Fatalf("pruned %v, candidates %v", pruned, cands)
	}
	kept := map[int]string{}
	for _, k := range res.Kept {
		kept[k.MachineID] = k.Reason
	}
	for id, want := range map[int]string{0: "live lease", 12: "live lease", 3: "in conflict", 7: "in conflict", 1: "newer than the cutoff"} {
		if !strings.Contains(kept[id], want) {
			t.Errorf("machine ID %d kept for %q, want %q", id, kept[id], want)
		}
	}
	// Older than 40 days: nothing.
	if res, _, _ := planPrune(f.s, 40*24*time.Hour); len(res.Pruned) != 0 {
		t.Errorf("older than 40 days pruned %v", res.Pruned)
	}
}

// A machine ID whose reservation was lost with Redis's data is covered by
// the loss floor: a claim starts a horizon after the loss (claim.lua), not
// after the registry's creation.
func TestVerify_NoReservation_LossFloorCovers(t *testing.T) {
	f := fleetFixture()
	delete(f.s.Records, 3)
	delete(f.s.Records, 7)
	f.s.Records[2].HasReserved = false // used up to tick(3h ago)
	if rep := Build(f.s); len(rep.Findings) != 1 || rep.Findings[0].Check != CheckReservationBelowUsed {
		t.Fatalf("without a loss: %v", rep.Findings)
	}
	f.s.Meta.LossAt = fixtureNow.Add(-time.Hour)
	if rep := Build(f.s); !rep.Consistent() {
		t.Fatalf("a loss an hour ago covers the ticks of 3 h ago: %v", rep.Findings)
	}
	if got, want := f.s.Meta.UnknownFloor(f.s.Layout), f.tick(time.Hour)+f.s.Meta.Horizon; got != want {
		t.Errorf("unknown floor %d, want %d", got, want)
	}
	f.s.Meta.LossAt = fixtureNow.Add(-4 * time.Hour)
	if rep := Build(f.s); len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0].Message, "a new owner would start after tick 5782320401") {
		t.Fatalf("a loss before the ticks were used: %v", rep.Findings)
	}
}
