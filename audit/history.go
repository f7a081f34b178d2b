package audit

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/flaked/flaked/contract"
)

// History is the story of one machine ID from the event stream.
type History struct {
	Namespace string      `json:"namespace"`
	MachineID int         `json:"machine_id"`
	Stream    HistoryInfo `json:"stream"`
	// Current is the ID's row in the audit table now (nil when no key
	// names it).
	Current *Machine `json:"current,omitempty"`
	// Reserved is the reservation of an ID Current does not list (one
	// audit prune forgot).
	Reserved *int64         `json:"reserved_tick,omitempty"`
	Events   []HistoryEvent `json:"events"`
}

// HistoryEvent is one event of a machine ID.
type HistoryEvent struct {
	EventID string            `json:"event_id"`
	Time    time.Time         `json:"time"`
	Type    string            `json:"type"`
	Owner   Owner             `json:"owner"`
	Fields  map[string]string `json:"fields"`
	Detail  string            `json:"detail"`
}

// HistoryOf returns the events of machine ID id, and the possible data
// losses of the registry, oldest first.
func HistoryOf(s *Snapshot, id int) *History {
	h := &History{Namespace: s.Namespace, MachineID: id, Stream: historyInfo(s), Events: []HistoryEvent{}}
	rep := Build(s)
	for i := range rep.Machines {
		if rep.Machines[i].MachineID == id {
			h.Current = &rep.Machines[i]
		}
	}
	if r := s.Records[id]; h.Current == nil && r != nil && r.HasReserved {
		h.Reserved = &r.Reserved
	}
	for _, e := range s.Events {
		// A data loss is the registry's, whichever script noticed it
		// (a change of Redis server names no machine ID at all): every
		// ID's reservation may have lost writes with it, and the claims
		// after it start at its loss floor, so each history shows it.
		if e.MachineID != id && e.Type != contract.EventDataLoss {
			continue
		}
		h.Events = append(h.Events, HistoryEvent{
			EventID: e.ID, Time: e.Time, Type: e.Type, Owner: e.Owner(),
			Fields: e.details(), Detail: e.detailText(s),
		})
	}
	return h
}

// WriteHistory writes a history as a table, oldest event first.
func WriteHistory(w io.Writer, h *History) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "machine ID %d in namespace %s: %d %s, oldest first\n", h.MachineID, h.Namespace,
		len(h.Events), plural(len(h.Events), "event", "events"))
	fmt.Fprintln(ew, streamNote(h.Stream))
	if len(h.Events) > 0 {
		tw := tabwriter.NewWriter(ew, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME (UTC)\tEVENT\tOWNER\tDETAIL")
		for _, e := range h.Events {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fmtTimeMs(e.Time), e.Type, e.Owner.String(), orDash(e.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if m := h.Current; m != nil {
		now := fmt.Sprintf("now: %s", m.State)
		if m.Owner != nil {
			now += ", owner " + m.Owner.String()
		}
		if m.ReservedTick != nil {
			now += fmt.Sprintf(", reservation %d", *m.ReservedTick)
		}
		fmt.Fprintln(ew, now)
		for _, p := range m.Problems {
			fmt.Fprintln(ew, "problem: "+p)
		}
	} else if h.Reserved != nil {
		fmt.Fprintf(ew, "now: forgotten (audit prune): no owner data or registration; its reservation %d is kept\n", *h.Reserved)
	} else {
		fmt.Fprintln(ew, "now: no key of the registry names this machine ID")
	}
	return ew.err
}

// streamNote says how far back the stream reaches.
func streamNote(h HistoryInfo) string {
	switch {
	case h.Events == 0 && h.Complete:
		return "the event stream is empty"
	case h.Events == 0:
		return "the event stream is empty: older events were trimmed or deleted"
	case h.Complete:
		return fmt.Sprintf("the event stream is complete: it reaches back to %s, when the registry was created", fmtTimeMs(*h.Oldest))
	}
	return fmt.Sprintf("the event stream reaches back to %s only: older events were trimmed (MAXLEN) or the stream is younger than the registry", fmtTimeMs(*h.Oldest))
}
