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

// detailText is the DETAIL column of a history: the fields that matter
// for the event's type first, then the rest in name order.
func (e Event) detailText(s *Snapshot) string {
	b := &detail{e: e, s: s, d: e.details()}
	switch e.Type {
	case contract.EventClaim, contract.EventReclaim, contract.EventTakeover:
		b.claim()
	case contract.EventRelease:
		b.tick(contract.FieldLast, "last tick ")
		b.tick(contract.FieldReserved, "reservation was ")
	case contract.EventMode:
		b.mode()
	case contract.EventClone:
		b.add(fmt.Sprintf("not taken: held by %s, a live process started from a copy of the same state file (node %s)",
			holderOf(b.d), orDash(b.d[contract.FieldNode])))
		drop(b.d, contract.FieldHolder, contract.FieldHolderHost, contract.FieldHolderPID, contract.FieldNode, contract.FieldDetail)
	case contract.EventFenced:
		b.add(fmt.Sprintf("taken over by %s, which started from a copy of this owner's state file", holderOf(b.d)))
		drop(b.d, contract.FieldHolder, contract.FieldHolderHost, contract.FieldHolderPID, contract.FieldDetail)
	case contract.EventLayoutRestored:
		b.layoutRestored()
	case contract.EventDataLoss:
		b.dataLoss()
	case contract.EventRenewFail:
		b.renewFail()
	case contract.EventPrune:
		b.prune()
	}
	for _, k := range slices.Sorted(maps.Keys(b.d)) {
		if b.d[k] != "" {
			b.add(k + " " + b.d[k])
		}
	}
	return strings.Join(b.parts, ", ")
}

// detail builds the DETAIL column of event e: parts taken from d, the
// event's fields (details), which keeps what is not taken yet.
type detail struct {
	e     Event
	s     *Snapshot
	d     map[string]string
	parts []string
}

func (b *detail) add(part string) { b.parts = append(b.parts, part) }

// take adds field k after label, unless it is empty.
func (b *detail) take(k, label string) {
	if v, ok := b.d[k]; ok {
		delete(b.d, k)
		if v != "" {
			b.add(label + v)
		}
	}
}

// tick adds field k, a tick, after label, with the tick's time when the
// snapshot's layout is known.
func (b *detail) tick(k, label string) {
	v, ok := b.d[k]
	if !ok {
		return
	}
	delete(b.d, k)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || b.s.Layout.BitsTime == 0 || n < 0 {
		b.add(label + v)
		return
	}
	b.add(fmt.Sprintf("%s%d (%s)", label, n, fmtTimeMs(b.s.Layout.TickTime(n))))
}

// claim is the detail of a claim, reclaim or takeover.
func (b *detail) claim() {
	b.tick(contract.FieldFloor, "floor ")
	// Every claim records its loss floor; it is news only where it set
	// the floor (a claim after a restart, failover or creation).
	if lf, ok := b.e.Int(contract.FieldLossFloor); ok {
		delete(b.d, contract.FieldLossFloor)
		if f, ok := b.e.Int(contract.FieldFloor); ok && lf >= f {
			b.add("the loss floor (a horizon after Redis may have lost writes)")
		}
	}
	if p, ok := b.e.PrevOwner(); ok {
		b.add("previous owner " + p.String())
	}
	drop(b.d, prevOwnerFields...)
	if v := b.d[contract.FieldFenced]; v != "" {
		b.add("fenced the live lease token " + v +
			" its state file named (its previous process, or a copy of it still running)")
	}
	delete(b.d, contract.FieldFenced)
	b.take(contract.FieldMode, "mode ")
	b.take(contract.FieldNode, "node ")
}

// mode is the detail of a mode switch.
func (b *detail) mode() {
	if from, to := b.d[contract.FieldFrom], b.d[contract.FieldTo]; from != "" || to != "" {
		b.add(from + " -> " + to)
		drop(b.d, contract.FieldFrom, contract.FieldTo)
	}
	b.take(contract.FieldReason, "reason: ")
	if ms, ok := b.e.Int(contract.FieldAtMs); ok {
		delete(b.d, contract.FieldAtMs)
		if at := time.UnixMilli(ms).UTC(); at.Before(b.e.Time.Add(-time.Second)) {
			b.add("happened " + fmtTimeMs(at))
		}
	}
}

// layoutRestored is the detail of a layout restored by a node of the
// fleet (guard.lua's fleetLayout).
func (b *detail) layoutRestored() {
	b.add(fmt.Sprintf("restored layout %s: the fleet's layout was missing (Redis lost it)", orDash(b.d[contract.FieldLayout])))
	drop(b.d, contract.FieldLayout, contract.FieldDetail)
}

// dataLoss is the detail of a data-loss event.
func (b *detail) dataLoss() {
	if d, ok := b.d[contract.FieldDetail]; ok {
		b.d[contract.FieldDetail] = contract.DataLossText(d)
	}
	b.take(contract.FieldDetail, "")
	if v, ok := b.d[contract.FieldServer]; ok {
		b.add(fmt.Sprintf("server %s, was %s", orDash(shortServer(v)), orDash(shortServer(b.d[contract.FieldPreviousServer]))))
		drop(b.d, contract.FieldServer, contract.FieldPreviousServer)
	}
	b.take(contract.FieldPreviousGeneration, "generation was ")
	b.take(contract.FieldGeneration, "generation ")
}

// renewFail is the detail of a refused renewal.
func (b *detail) renewFail() {
	if r, ok := b.d[contract.FieldReason]; ok {
		b.d[contract.FieldReason] = contract.RenewFailReason(r)
	}
	b.take(contract.FieldReason, "reason: ")
	if l, st := b.d[contract.FieldLayout], b.d[contract.FieldStored]; l != "" || st != "" {
		b.add(fmt.Sprintf("this owner runs %s, the fleet's is %s", orDash(l), orDash(st)))
		drop(b.d, contract.FieldLayout, contract.FieldStored)
	}
	if t, ok := msTime(b.d[contract.FieldLossMs]); ok {
		b.add("possible data loss at " + fmtTimeMs(t))
		delete(b.d, contract.FieldLossMs)
	}
	b.tick(contract.FieldHeld, "held reservation ")
	b.tick(contract.FieldReserved, "reservation ")
	b.take(contract.FieldHolder, "lease token ")
}

// prune is the detail of a machine ID forgotten by prune.
func (b *detail) prune() {
	if p, ok := b.e.PrevOwner(); ok {
		b.add("forgot owner " + p.String())
	}
	drop(b.d, prevOwnerFields...)
	b.take(contract.FieldPrevState, "state was ")
	b.tick(contract.FieldReserved, "reservation kept ")
}
