package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event is one entry of the {ns}:events stream. The scripts and nodes
// write: claim, reclaim, takeover (floor, prev_host, prev_pid, prev_addr,
// prev_token, mode, fenced, node, loss_floor), release (last, reserved),
// reassert (reserved), renew_fail (reason, ...), mode (from, to, reason,
// at_ms), clone (holder, node, holder_host, holder_pid, detail), fenced
// (holder, holder_host, holder_pid, detail), layout_restored (layout,
// refused, detail), dataloss (server, previous_server, detail: no machine
// ID; or generation, previous_generation, detail), clock_skew,
// layout_mismatch, counter_init; audit prune writes prune.
type Event struct {
	ID        string    // stream entry ID, "<ms>-<seq>"
	Time      time.Time // when Redis wrote it (the ID's milliseconds)
	Type      string
	MachineID int // -1 when the event names no machine ID
	Fields    map[string]string
}

// Owner is who wrote the event.
func (e Event) Owner() Owner {
	return Owner{Host: e.Fields["host"], PID: atoi(e.Fields["pid"]), Addr: e.Fields["addr"], Token: shortToken(e.Fields["token"])}
}

// PrevOwner is the owner a claim replaced (claim events name it).
func (e Event) PrevOwner() (Owner, bool) {
	o := Owner{Host: e.Fields["prev_host"], PID: atoi(e.Fields["prev_pid"]), Addr: e.Fields["prev_addr"], Token: shortToken(e.Fields["prev_token"])}
	return o, o.Host != "" || o.Token != ""
}

// Int reads a numeric field.
func (e Event) Int(field string) (int64, bool) {
	n, err := strconv.ParseInt(e.Fields[field], 10, 64)
	return n, err == nil
}

// At is when the event happened: mode events written late (Redis was
// away) carry it in at_ms; for every other event it is Time.
func (e Event) At() time.Time {
	if ms, ok := e.Int("at_ms"); ok {
		return time.UnixMilli(ms).UTC()
	}
	return e.Time
}

// isClaim reports whether the event starts an owner's hold on its machine
// ID; its floor is the last tick that owner does not use.
func (e Event) isClaim() bool {
	return e.Type == "claim" || e.Type == "reclaim" || e.Type == "takeover"
}

// readEvents reads the stream up to s.Stream.LastID (the last entry the
// snapshot's transaction saw), in pages.
func readEvents(ctx context.Context, c *redis.Client, k keys, s *Snapshot) error {
	if s.Stream.LastID == "" {
		return nil
	}
	const page = 1000
	start := "-"
	for {
		msgs, err := c.XRangeN(ctx, k.events, start, s.Stream.LastID, page).Result()
		if err != nil {
			return fmt.Errorf("read event stream %s: %w", k.events, err)
		}
		for _, m := range msgs {
			s.Events = append(s.Events, parseEvent(m))
		}
		if len(msgs) < page {
			return nil
		}
		start = nextID(msgs[len(msgs)-1].ID)
	}
}

// nextID is the smallest stream ID after id (exclusive ranges without the
// Redis 6.2 "(" syntax).
func nextID(id string) string {
	ms, seq, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseUint(seq, 10, 64)
	return ms + "-" + strconv.FormatUint(n+1, 10)
}

func parseEvent(m redis.XMessage) Event {
	e := Event{ID: m.ID, MachineID: -1, Fields: make(map[string]string, len(m.Values))}
	e.Time, _ = entryTime(m.ID)
	for k, v := range m.Values {
		e.Fields[k] = fmt.Sprint(v)
	}
	e.Type = e.Fields["type"]
	if id, err := parseMachineID(e.Fields["mid"]); err == nil {
		e.MachineID = id
	}
	return e
}

// entryTime is the time part of a stream entry ID.
func entryTime(id string) (time.Time, error) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("stream ID %q: %w", id, err)
	}
	return time.UnixMilli(n).UTC(), nil
}

// eventsOf returns the events naming machine ID id, oldest first.
func (s *Snapshot) eventsOf(id int) []Event {
	// Indexed once per snapshot: scanning the stream for every machine ID
	// made a report of 60,000 IDs and 100,000 events quadratic (15 s).
	if s.byID == nil || s.indexed != len(s.Events) {
		s.byID = map[int][]int32{}
		for i, e := range s.Events {
			s.byID[e.MachineID] = append(s.byID[e.MachineID], int32(i))
		}
		s.indexed = len(s.Events)
	}
	at := s.byID[id]
	if len(at) == 0 {
		return nil
	}
	out := make([]Event, len(at))
	for i, j := range at {
		out[i] = s.Events[j]
	}
	return out
}

// Owner identifies the process that held a machine ID.
type Owner struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Addr    string `json:"addr,omitempty"`
	Version string `json:"version,omitempty"`
	// Token is the first 8 hex digits of the owner token: enough to tell
	// two owners on one host apart, not enough to act as the owner.
	Token string `json:"token,omitempty"`
	// Node is the node ID of the owner's state file, shared by every copy
	// of that file ("" without one). It grants nothing (the token is the
	// lease's identity), so it is shown whole: it is what to look for in
	// the state files of the hosts.
	Node string `json:"node,omitempty"`
}

func ownerOf(h map[string]string) *Owner {
	if h == nil {
		return nil
	}
	return &Owner{Host: h["host"], PID: atoi(h["pid"]), Addr: h["addr"], Version: h["version"], Token: shortToken(h["token"]), Node: h["node"]}
}

// String is "host pid 123 addr 10.0.0.1:7379 token 1a2b3c4d", leaving out
// what is unknown.
func (o Owner) String() string {
	var b strings.Builder
	b.WriteString(orDash(o.Host))
	if o.PID != 0 {
		fmt.Fprintf(&b, " pid %d", o.PID)
	}
	if o.Addr != "" {
		b.WriteString(" addr " + o.Addr)
	}
	if o.Token != "" {
		b.WriteString(" token " + o.Token)
	}
	return b.String()
}

// tokenFields hold owner tokens; reports show only their first 8 digits.
// A whole token is a credential: a claim that presents a live lease's
// token takes that lease over (claim.lua).
var tokenFields = map[string]bool{"token": true, "prev_token": true, "holder": true, "fenced": true, "from_token": true}

func shortToken(t string) string {
	if len(t) > 8 {
		return t[:8]
	}
	return t
}

// details are an event's fields other than who wrote it, tokens shortened.
func (e Event) details() map[string]string {
	out := map[string]string{}
	for k, v := range e.Fields {
		switch k {
		case "type", "mid", "host", "pid", "addr", "token":
			continue
		}
		if tokenFields[k] {
			v = shortToken(v)
		}
		out[k] = v
	}
	return out
}

// detailText is the DETAIL column of a history: the fields that matter
// for the event's type first, then the rest in name order.
func (e Event) detailText(s *Snapshot) string {
	d := e.details()
	var parts []string
	take := func(k, label string) {
		if v, ok := d[k]; ok {
			delete(d, k)
			if v != "" {
				parts = append(parts, label+v)
			}
		}
	}
	tick := func(k, label string) {
		if v, ok := d[k]; ok {
			delete(d, k)
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || s.Layout.BitsTime == 0 || n < 0 {
				parts = append(parts, label+v)
				return
			}
			parts = append(parts, fmt.Sprintf("%s%d (%s)", label, n, fmtTimeMs(s.Layout.TickTime(n))))
		}
	}
	switch e.Type {
	case "claim", "reclaim", "takeover":
		tick("floor", "floor ")
		// Every claim records its loss floor; it is news only where it
		// set the floor (a claim after a restart, failover or creation).
		if lf, ok := e.Int("loss_floor"); ok {
			delete(d, "loss_floor")
			if f, ok := e.Int("floor"); ok && lf >= f {
				parts = append(parts, "the loss floor (a horizon after Redis may have lost writes)")
			}
		}
		if p, ok := e.PrevOwner(); ok {
			parts = append(parts, "previous owner "+p.String())
		}
		for _, k := range []string{"prev_host", "prev_pid", "prev_addr", "prev_token"} {
			delete(d, k)
		}
		if v := d["fenced"]; v != "" {
			parts = append(parts, "fenced the live lease token "+v+
				" its state file named (its previous process, or a copy of it still running)")
		}
		delete(d, "fenced")
		take("mode", "mode ")
		take("node", "node ")
	case "release":
		tick("last", "last tick ")
		tick("reserved", "reservation was ")
	case "reassert":
		tick("reserved", "reservation ")
	case "mode":
		if from, to := d["from"], d["to"]; from != "" || to != "" {
			parts = append(parts, from+" -> "+to)
			delete(d, "from")
			delete(d, "to")
		}
		take("reason", "reason: ")
		if ms, ok := e.Int("at_ms"); ok {
			delete(d, "at_ms")
			if at := time.UnixMilli(ms).UTC(); at.Before(e.Time.Add(-time.Second)) {
				parts = append(parts, "happened "+fmtTimeMs(at))
			}
		}
	case "clone":
		parts = append(parts, fmt.Sprintf("not taken: held by %s, a live process started from a copy of the same state file (node %s)",
			holderOf(d), orDash(d["node"])))
		drop(d, "holder", "holder_host", "holder_pid", "node", "detail")
	case "fenced":
		parts = append(parts, fmt.Sprintf("taken over by %s, which started from a copy of this owner's state file", holderOf(d)))
		drop(d, "holder", "holder_host", "holder_pid", "detail")
	case "layout_restored":
		if v := d["refused"]; v != "" {
			parts = append(parts, fmt.Sprintf("restored layout %s over %s, which a claim stored after Redis lost its data", orDash(d["layout"]), v))
		} else {
			parts = append(parts, fmt.Sprintf("restored layout %s: the fleet's layout was missing (Redis lost it)", orDash(d["layout"])))
		}
		drop(d, "layout", "refused", "detail")
	case "dataloss":
		take("detail", "")
		if v, ok := d["server"]; ok {
			parts = append(parts, fmt.Sprintf("server %s, was %s", orDash(shortServer(v)), orDash(shortServer(d["previous_server"]))))
			drop(d, "server", "previous_server")
		}
		take("previous_generation", "generation was ")
		take("generation", "generation ")
	case "renew_fail":
		take("reason", "reason: ")
		if l, st := d["layout"], d["stored"]; l != "" || st != "" {
			parts = append(parts, fmt.Sprintf("this owner runs %s, the fleet's is %s", orDash(l), orDash(st)))
			drop(d, "layout", "stored")
		}
		if t, ok := msTime(d["loss_ms"]); ok {
			parts = append(parts, "possible data loss at "+fmtTimeMs(t))
			delete(d, "loss_ms")
		}
		tick("held", "held reservation ")
		tick("reserved", "reservation ")
		take("holder", "lease token ")
	case "prune":
		if p, ok := e.PrevOwner(); ok {
			parts = append(parts, "forgot owner "+p.String())
		}
		for _, k := range []string{"prev_host", "prev_pid", "prev_addr", "prev_token"} {
			delete(d, k)
		}
		take("prev_state", "state was ")
		tick("reserved", "reservation kept ")
	}
	for _, k := range slices.Sorted(maps.Keys(d)) {
		if d[k] != "" {
			parts = append(parts, k+" "+d[k])
		}
	}
	return strings.Join(parts, ", ")
}

// holderOf is the process a clone or fenced event names.
func holderOf(d map[string]string) Owner {
	return Owner{Host: d["holder_host"], PID: atoi(d["holder_pid"]), Token: d["holder"]}
}

// shortServer shortens a Redis server identity, run_id:master_replid (40
// hex digits each), to 8 digits of each: enough to tell servers apart.
func shortServer(id string) string {
	run, repl, ok := strings.Cut(id, ":")
	if !ok {
		return shortToken(id)
	}
	return shortToken(run) + ":" + shortToken(repl)
}

func drop(d map[string]string, keys ...string) {
	for _, k := range keys {
		delete(d, k)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
