package audit

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flaked/flaked/scripts/lua"
)

// detailText is the DETAIL column of a history: the fields that matter
// for the event's type first, then the rest in name order.
func (e Event) detailText(s *Snapshot) string {
	b := &detail{e: e, s: s, d: e.details()}
	switch e.Type {
	case lua.EventClaim, lua.EventReclaim, lua.EventTakeover:
		b.claim()
	case lua.EventRelease:
		b.tick(lua.FieldLast, "last tick ")
		b.tick(lua.FieldReserved, "reservation was ")
	case lua.EventMode:
		b.mode()
	case lua.EventClone:
		b.add(fmt.Sprintf("not taken: held by %s, a live process started from a copy of the same state file (node %s)",
			holderOf(b.d), orDash(b.d[lua.FieldNode])))
		drop(b.d, lua.FieldHolder, lua.FieldHolderHost, lua.FieldHolderPID, lua.FieldNode, lua.FieldDetail)
	case lua.EventFenced:
		b.add(fmt.Sprintf("taken over by %s, which started from a copy of this owner's state file", holderOf(b.d)))
		drop(b.d, lua.FieldHolder, lua.FieldHolderHost, lua.FieldHolderPID, lua.FieldDetail)
	case lua.EventLayoutRestored:
		b.layoutRestored()
	case lua.EventDataLoss:
		b.dataLoss()
	case lua.EventRenewFail:
		b.renewFail()
	case lua.EventPrune:
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
	b.tick(lua.FieldFloor, "floor ")
	// Every claim records its loss floor; it is news only where it set
	// the floor (a claim after a restart, failover or creation).
	if lf, ok := b.e.Int(lua.FieldLossFloor); ok {
		delete(b.d, lua.FieldLossFloor)
		if f, ok := b.e.Int(lua.FieldFloor); ok && lf >= f {
			b.add("the loss floor (a horizon after Redis may have lost writes)")
		}
	}
	if p, ok := b.e.PrevOwner(); ok {
		b.add("previous owner " + p.String())
	}
	drop(b.d, prevOwnerFields...)
	if v := b.d[lua.FieldFenced]; v != "" {
		b.add("fenced the live lease token " + v +
			" its state file named (its previous process, or a copy of it still running)")
	}
	delete(b.d, lua.FieldFenced)
	b.take(lua.FieldMode, "mode ")
	b.take(lua.FieldNode, "node ")
}

// mode is the detail of a mode switch.
func (b *detail) mode() {
	if from, to := b.d[lua.FieldFrom], b.d[lua.FieldTo]; from != "" || to != "" {
		b.add(from + " -> " + to)
		drop(b.d, lua.FieldFrom, lua.FieldTo)
	}
	b.take(lua.FieldReason, "reason: ")
	if ms, ok := b.e.Int(lua.FieldAtMs); ok {
		delete(b.d, lua.FieldAtMs)
		if at := time.UnixMilli(ms).UTC(); at.Before(b.e.Time.Add(-time.Second)) {
			b.add("happened " + fmtTimeMs(at))
		}
	}
}

// layoutRestored is the detail of a layout restored by a renewal.
func (b *detail) layoutRestored() {
	if v := b.d[lua.FieldRefused]; v != "" {
		b.add(fmt.Sprintf("restored layout %s over %s, which a claim stored after Redis lost its data", orDash(b.d[lua.FieldLayout]), v))
	} else {
		b.add(fmt.Sprintf("restored layout %s: the fleet's layout was missing (Redis lost it)", orDash(b.d[lua.FieldLayout])))
	}
	drop(b.d, lua.FieldLayout, lua.FieldRefused, lua.FieldDetail)
}

// dataLoss is the detail of a data-loss event.
func (b *detail) dataLoss() {
	if d, ok := b.d[lua.FieldDetail]; ok {
		b.d[lua.FieldDetail] = lua.DataLossText(d)
	}
	b.take(lua.FieldDetail, "")
	if v, ok := b.d[lua.FieldServer]; ok {
		b.add(fmt.Sprintf("server %s, was %s", orDash(shortServer(v)), orDash(shortServer(b.d[lua.FieldPreviousServer]))))
		drop(b.d, lua.FieldServer, lua.FieldPreviousServer)
	}
	b.take(lua.FieldPreviousGeneration, "generation was ")
	b.take(lua.FieldGeneration, "generation ")
}

// renewFail is the detail of a refused renewal.
func (b *detail) renewFail() {
	if r, ok := b.d[lua.FieldReason]; ok {
		b.d[lua.FieldReason] = lua.RenewFailReason(r)
	}
	b.take(lua.FieldReason, "reason: ")
	if l, st := b.d[lua.FieldLayout], b.d[lua.FieldStored]; l != "" || st != "" {
		b.add(fmt.Sprintf("this owner runs %s, the fleet's is %s", orDash(l), orDash(st)))
		drop(b.d, lua.FieldLayout, lua.FieldStored)
	}
	if t, ok := msTime(b.d[lua.FieldLossMs]); ok {
		b.add("possible data loss at " + fmtTimeMs(t))
		delete(b.d, lua.FieldLossMs)
	}
	b.tick(lua.FieldHeld, "held reservation ")
	b.tick(lua.FieldReserved, "reservation ")
	b.take(lua.FieldHolder, "lease token ")
}

// prune is the detail of a machine ID forgotten by prune.
func (b *detail) prune() {
	if p, ok := b.e.PrevOwner(); ok {
		b.add("forgot owner " + p.String())
	}
	drop(b.d, prevOwnerFields...)
	b.take(lua.FieldPrevState, "state was ")
	b.tick(lua.FieldReserved, "reservation kept ")
}
