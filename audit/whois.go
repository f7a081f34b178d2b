package audit

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
)

// ErrNoLayout is returned when the registry holds no readable layout, so
// an ID cannot be decoded the way the fleet made it.
var ErrNoLayout = errors.New("the registry holds no readable layout")

// Whois says who issued one ID.
type Whois struct {
	ID        string    `json:"id"`
	Base32    string    `json:"base32"`
	Time      time.Time `json:"time"`
	Tick      int64     `json:"tick"`
	Sequence  int       `json:"sequence"`
	MachineID int       `json:"machine_id"`
	// Region is the machine ID's region, in a layout with regions.
	Region *int   `json:"region,omitempty"`
	Mode   string `json:"mode"`
	// Known: the owner (or counter mode) was found.
	Known bool   `json:"known"`
	Owner *Owner `json:"owner,omitempty"`
	// Source is where the owner was found: "events" or "owner data".
	Source string `json:"source,omitempty"`
	// Claim is the claim that gave Owner the machine ID; its floor is the
	// tick after which the owner issued.
	Claim *EventRef `json:"claim,omitempty"`
	// Release ends the owner's hold; Next is the claim of the next owner
	// (its floor is at or above the tick).
	Release *EventRef `json:"release,omitempty"`
	Next    *EventRef `json:"next_claim,omitempty"`
	// CounterNodes: for a counter-mode ID, the nodes the mode events show
	// in counter mode when its counter segment could have been taken.
	CounterNodes []Owner `json:"counter_nodes,omitempty"`
	Explanation  string  `json:"explanation"`
}

// EventRef points at an event of the stream.
type EventRef struct {
	EventID string    `json:"event_id,omitempty"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	// Tick is a claim's floor or a release's last tick.
	Tick *int64 `json:"tick,omitempty"`
}

func refOf(e Event, field string) *EventRef {
	r := &EventRef{EventID: e.ID, Time: e.Time, Type: e.Type}
	if t, ok := e.Int(field); ok {
		r.Tick = &t
	}
	return r
}

// counterWindow: a counter value's tick is the Redis TIME tick its segment
// was taken in, up to the counter's lead (default 1 s) later; a node took
// it while in counter mode during that window.
const counterWindow = 2 * time.Second

// WhoIs decodes id under the fleet's layout and finds its owner in the
// event history.
//
// A claim's floor partitions a machine ID's ticks: the owner that claimed
// with floor F issued only ticks above F, and every later claim's floor
// is at least the reservation, so at least every tick that owner issued.
// The owner of tick t is therefore the last claim whose floor is below t.
// Wall clocks do not enter into it.
func WhoIs(s *Snapshot, id uint64) (*Whois, error) {
	w, p, err := decodeWhois(s, id)
	if err != nil {
		return nil, err
	}
	l := s.Layout
	switch {
	case l.BitsRegion > 0 && p.Region != l.Region:
		// Each region's registry leases only its own machine IDs, and
		// its counter is its own: this one issued nothing there.
		w.Explanation = fmt.Sprintf("machine ID %d is in region %d (machine IDs %d..%d); this registry is region %d's (%d..%d): ask region %d's",
			p.MachineID, p.Region, p.Region*l.MachineIDsPerRegion(), (p.Region+1)*l.MachineIDsPerRegion()-1,
			l.Region, l.MinMachineID(), l.CounterMachineID(), p.Region)
		return w, nil
	case p.MachineID == l.CounterMachineID():
		whoisCounter(s, w)
		return w, nil
	}
	var claims []Event
	for _, e := range s.eventsOf(p.MachineID) {
		if e.isClaim() {
			claims = append(claims, e)
		}
	}
	idx := -1 // the last claim whose floor is below the tick
	for i, c := range claims {
		if f, ok := c.Int(contract.FieldFloor); ok && f < p.Tick {
			idx = i
		}
	}
	switch {
	case idx >= 0:
		whoisByClaim(s, w, p, claims, idx)
	case !whoisByOwnerData(s, w, p, len(claims) > 0):
		w.Explanation = notFound(s, p.MachineID, p.Tick, claims)
	}
	return w, nil
}

// decodeWhois checks id against the fleet's layout and fills in its parts.
func decodeWhois(s *Snapshot, id uint64) (*Whois, flake.Parts, error) {
	l := s.Layout
	if l.BitsTime == 0 {
		if s.LayoutErr != "" {
			return nil, flake.Parts{}, fmt.Errorf("%w: %s", ErrNoLayout, s.LayoutErr)
		}
		return nil, flake.Parts{}, fmt.Errorf("%w: %s is missing", ErrNoLayout, s.keys().Layout)
	}
	if err := l.CheckID(id); err != nil {
		return nil, flake.Parts{}, err
	}
	p := l.Decompose(id)
	w := &Whois{ID: flake.FormatID(p.ID), Base32: flake.FormatBase32(p.ID), Time: p.Time, Tick: p.Tick,
		Sequence: p.Sequence, MachineID: p.MachineID, Mode: "flake"}
	if l.IsCounterMachineID(p.MachineID) {
		w.Mode = "counter"
	}
	if l.BitsRegion > 0 {
		w.Region = &p.Region
	}
	return w, p, nil
}

// whoisByClaim explains the ID by claims[idx], the last claim of its
// machine ID below its tick: the owner it names issued the tick unless
// the next claim starts below it, or the tick is above the reservation.
func whoisByClaim(s *Snapshot, w *Whois, p flake.Parts, claims []Event, idx int) {
	t, c, rec := p.Tick, claims[idx], s.Records[p.MachineID]
	w.Claim = refOf(c, contract.FieldFloor)
	o := c.Owner()
	if rec != nil && rec.Owner != nil && rec.Owner[contract.OwnerToken] == c.Fields.Get(contract.FieldToken) {
		o.Version = rec.Owner[contract.OwnerVersion]
	}
	w.Owner, w.Source = &o, "events"
	for _, e := range s.eventsOf(p.MachineID) {
		if e.Type == contract.EventRelease && e.Fields.Get(contract.FieldToken) == c.Fields.Get(contract.FieldToken) && streamLess(c.ID, e.ID) {
			if idx+1 >= len(claims) || streamLess(e.ID, claims[idx+1].ID) {
				w.Release = refOf(e, contract.FieldLast)
			}
			break
		}
	}
	held := fmt.Sprintf("the %s at %s gave %s machine ID %d with floor %d, so it issued the ticks after %d",
		c.Type, fmtTimeMs(c.Time), o.String(), p.MachineID, *w.Claim.Tick, *w.Claim.Tick)
	switch {
	case idx+1 < len(claims):
		n := claims[idx+1]
		w.Next = refOf(n, contract.FieldFloor)
		w.Known = true
		w.Explanation = fmt.Sprintf("%s; the next claim, the %s at %s, starts after tick %d >= %d",
			held, n.Type, fmtTimeMs(n.Time), derefTick(w.Next), t)
	case rec != nil && rec.HasReserved && t > rec.Reserved:
		w.Known = false
		w.Explanation = fmt.Sprintf("%s, but tick %d is above the reservation %d of machine ID %d: no owner has issued it (yet); the ID was not made by this fleet, or Redis lost data",
			held, t, rec.Reserved, p.MachineID)
	default:
		w.Known = true
		w.Explanation = held + "; no later claim is recorded"
		if w.Release != nil {
			w.Explanation += fmt.Sprintf("; it released the ID at %s", fmtTimeMs(w.Release.Time))
		} else if rec != nil && rec.Lease != "" && rec.Lease == c.Fields.Get(contract.FieldToken) {
			w.Explanation += "; it holds the lease now"
		}
	}
}

// whoisByOwnerData explains the ID when no recorded claim covers its tick:
// the owner data still names the last owner and its floor when the claim
// event was trimmed. It reports whether it could.
func whoisByOwnerData(s *Snapshot, w *Whois, p flake.Parts, anyClaim bool) bool {
	t, rec := p.Tick, s.Records[p.MachineID]
	if rec == nil || rec.Owner == nil || anyClaim {
		return false
	}
	f, ok := intField(rec.Owner, contract.OwnerFloor)
	if !ok || f >= t || rec.HasReserved && t > rec.Reserved {
		return false
	}
	w.Owner, w.Source, w.Known = ownerOf(rec.Owner), "owner data", true
	w.Claim = &EventRef{Type: contract.EventClaim, Tick: &f}
	if at, ok := msTime(rec.Owner[contract.OwnerClaimed]); ok {
		w.Claim.Time = at
	}
	w.Explanation = fmt.Sprintf("its claim event is no longer in the stream, but the owner data of machine ID %d names %s, claimed at %s with floor %d < %d, as the last owner",
		p.MachineID, w.Owner.String(), fmtTimeMs(w.Claim.Time), f, t)
	return true
}

// notFound explains why no owner covers tick t, saying clearly whether the
// history is too short.
func notFound(s *Snapshot, mid int, t int64, claims []Event) string {
	stream := "the event stream is empty"
	if len(s.Events) > 0 {
		stream = "the stream starts at " + fmtTimeMs(s.Events[0].Time) + "; older events were trimmed"
	}
	if len(claims) == 0 {
		if s.Stream.Complete {
			return fmt.Sprintf("no claim of machine ID %d was ever recorded, and the event history is complete: no owner in this registry issued it (it was not made by this fleet, or Redis lost its data)", mid)
		}
		return fmt.Sprintf("the event history does not reach back far enough: no claim of machine ID %d is left in it (%s)", mid, stream)
	}
	c0 := claims[0]
	f0, _ := c0.Int("floor")
	first := fmt.Sprintf("the oldest recorded claim of machine ID %d, the %s at %s by %s, starts after tick %d >= %d",
		mid, c0.Type, fmtTimeMs(c0.Time), c0.Owner().String(), f0, t)
	if s.Stream.Complete {
		return fmt.Sprintf("%s, and the event history is complete since the registry was created at %s: no owner in this registry issued it (it was not made by this fleet, or Redis lost its data)",
			first, fmtTimeMs(s.Meta.Created))
	}
	msg := fmt.Sprintf("the event history does not reach back far enough: %s (%s)", first, stream)
	if prev, ok := c0.PrevOwner(); ok {
		msg += fmt.Sprintf("; the owner before that claim was %s: it, or an owner before it, issued this ID", prev.String())
	}
	return msg
}

// whoisCounter fills in a counter-mode ID: the counter does not record
// which node took which value, so the answer is the mode and the nodes
// the mode events show in counter mode around the tick.
func whoisCounter(s *Snapshot, w *Whois) {
	w.Mode, w.Known, w.Source = "counter", true, "counter mode"
	from, to := w.Time.Add(-counterWindow), w.Time.Add(s.Layout.TimeUnit)
	type span struct {
		owner   Owner
		inSince time.Time // zero: not in counter mode
		hit     bool
	}
	nodes := map[string]*span{}
	var order []string
	events := slices.Clone(s.Events)
	slices.SortStableFunc(events, func(a, b Event) int { return a.At().Compare(b.At()) })
	for _, e := range events {
		if e.Type != contract.EventMode {
			continue
		}
		at := e.At()
		if at.After(to) {
			break
		}
		o := e.Owner()
		key := fmt.Sprintf("%s/%d/%s", o.Host, o.PID, o.Addr)
		sp := nodes[key]
		if sp == nil {
			sp = &span{owner: Owner{Host: o.Host, PID: o.PID, Addr: o.Addr}}
			nodes[key] = sp
			order = append(order, key)
		}
		switch {
		case e.Fields.Get(contract.FieldTo) == "counter" && sp.inSince.IsZero():
			sp.inSince = at
		case e.Fields.Get(contract.FieldTo) != "counter" && !sp.inSince.IsZero():
			if !at.Before(from) {
				sp.hit = true // in counter mode until inside the window
			}
			sp.inSince = time.Time{}
		}
	}
	for _, key := range order {
		if sp := nodes[key]; sp.hit || !sp.inSince.IsZero() {
			w.CounterNodes = append(w.CounterNodes, sp.owner)
		}
	}
	w.Explanation = fmt.Sprintf("machine ID %d is reserved for counter mode: the ID came from %s, whose values are floored to Redis TIME, so it was taken around %s by a node in counter mode; the counter does not record which node took which value",
		w.MachineID, s.keys().Counter, fmtTimeMs(w.Time))
	switch {
	case len(w.CounterNodes) > 0:
		var names []string
		for _, o := range w.CounterNodes {
			names = append(names, o.String())
		}
		w.Explanation += fmt.Sprintf("; the mode events show in counter mode then: %s", strings.Join(names, "; "))
	case s.Stream.Complete:
		w.Explanation += "; no mode event shows a node in counter mode then"
	default:
		w.Explanation += "; no mode event left in the stream shows a node in counter mode then (older events were trimmed)"
	}
}

// WriteWhois writes the answer as "key: value" lines.
func WriteWhois(w io.Writer, a *Whois) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "id:        %s\nbase32:    %s\ntime:      %s\ntick:      %d\nsequence:  %d\nmachine:   %d\n",
		a.ID, a.Base32, a.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), a.Tick, a.Sequence, a.MachineID)
	if a.Region != nil {
		fmt.Fprintf(ew, "region:    %d\n", *a.Region)
	}
	fmt.Fprintf(ew, "mode:      %s\n", a.Mode)
	switch {
	case a.Owner != nil:
		fmt.Fprintf(ew, "owner:     %s\n", a.Owner.String())
	case a.Mode == "counter":
		for _, o := range a.CounterNodes {
			fmt.Fprintf(ew, "candidate: %s\n", o.String())
		}
	default:
		fmt.Fprintln(ew, "owner:     unknown")
	}
	if a.Owner != nil && a.Owner.Version != "" {
		fmt.Fprintf(ew, "version:   %s\n", a.Owner.Version)
	}
	if c := a.Claim; c != nil {
		fmt.Fprintf(ew, "claimed:   %s at %s, floor %d (from %s)\n", c.Type, fmtTimeMs(c.Time), derefTick(c), a.Source)
	}
	if r := a.Release; r != nil {
		fmt.Fprintf(ew, "released:  at %s, last tick %d\n", fmtTimeMs(r.Time), derefTick(r))
	}
	if n := a.Next; n != nil {
		fmt.Fprintf(ew, "next:      %s at %s, floor %d\n", n.Type, fmtTimeMs(n.Time), derefTick(n))
	}
	fmt.Fprintf(ew, "why:       %s\n", a.Explanation)
	return ew.err
}

func derefTick(r *EventRef) int64 {
	if r == nil || r.Tick == nil {
		return -1
	}
	return *r.Tick
}

func intField(h map[string]string, k string) (int64, bool) {
	n, err := strconv.ParseInt(h[k], 10, 64)
	return n, err == nil
}

// streamLess compares stream entry IDs.
func streamLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if len(am) != len(bm) {
		return len(am) < len(bm)
	}
	if am != bm {
		return am < bm
	}
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	return as < bs
}
