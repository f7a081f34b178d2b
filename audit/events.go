package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

// Event is one entry of the {ns}:events stream. The scripts and nodes
// write: claim, reclaim, takeover (floor, prev_host, prev_pid, prev_addr,
// prev_token, mode, fenced, node, loss_floor), release (last, reserved),
// renew_fail (reason, ...), mode (from, to, reason,
// at_ms), clone (holder, node, holder_host, holder_pid, detail), fenced
// (holder, holder_host, holder_pid, detail), layout_restored (layout,
// refused, detail), dataloss (server, previous_server, detail: no machine
// ID; or generation, previous_generation, detail), clock_skew,
// layout_mismatch, counter_init; audit prune writes prune. The names are
// lua's Event* and Field* constants.
type Event struct {
	ID        string    // stream entry ID, "<ms>-<seq>"
	Time      time.Time // when Redis wrote it (the ID's milliseconds)
	Type      string
	MachineID int // -1 when the event names no machine ID
	Fields    Fields
}

// Fields are an event's fields as the stream holds them: name, value,
// name, value. A slice, not a map: 100,000 events with a map of 10-14
// entries each were a fifth of a large audit's CPU and most of its
// memory, and an event is read by a handful of names.
type Fields []string

// Get returns the value of field name ("" when there is none); the last
// one when the entry names it twice, as a map of them would.
func (f Fields) Get(name string) string {
	for i := len(f) - 2; i >= 0; i -= 2 {
		if f[i] == name {
			return f[i+1]
		}
	}
	return ""
}

// Set sets field name to v, adding it when missing.
func (f *Fields) Set(name, v string) {
	for i := len(*f) - 2; i >= 0; i -= 2 {
		if (*f)[i] == name {
			(*f)[i+1] = v
			return
		}
	}
	*f = append(*f, name, v)
}

// Owner is who wrote the event.
func (e Event) Owner() Owner {
	f := e.Fields
	return Owner{Host: f.Get(contract.FieldHost), PID: atoi(f.Get(contract.FieldPID)), Addr: f.Get(contract.FieldAddr), Token: shortToken(f.Get(contract.FieldToken))}
}

// PrevOwner is the owner a claim replaced (claim events name it).
func (e Event) PrevOwner() (Owner, bool) {
	f := e.Fields
	o := Owner{Host: f.Get(contract.FieldPrevHost), PID: atoi(f.Get(contract.FieldPrevPID)), Addr: f.Get(contract.FieldPrevAddr),
		Token: shortToken(f.Get(contract.FieldPrevToken))}
	return o, o.Host != "" || o.Token != ""
}

// Int reads a numeric field.
func (e Event) Int(field string) (int64, bool) {
	n, err := strconv.ParseInt(e.Fields.Get(field), 10, 64)
	return n, err == nil
}

// At is when the event happened: mode events written late (Redis was
// away) carry it in at_ms; for every other event it is Time.
func (e Event) At() time.Time {
	if ms, ok := e.Int(contract.FieldAtMs); ok {
		return time.UnixMilli(ms).UTC()
	}
	return e.Time
}

// isClaim reports whether the event starts an owner's hold on its machine
// ID; its floor is the last tick that owner does not use.
func (e Event) isClaim() bool {
	return e.Type == contract.EventClaim || e.Type == contract.EventReclaim || e.Type == contract.EventTakeover
}

// readEvents reads the stream up to s.Stream.LastID (the last entry the
// snapshot's transaction saw), in pages. The replies are read raw: go-redis
// would build a map of each entry's fields only for it to be copied.
func readEvents(ctx context.Context, c *redis.Client, k contract.Keys, s *Snapshot, p *progress) error {
	if s.Stream.LastID == "" {
		return nil
	}
	s.Events = make([]Event, 0, s.Stream.Length)
	in := interner{}
	start := "-"
	for {
		msgs, err := c.Do(ctx, "XRANGE", k.Events, start, s.Stream.LastID, "COUNT", page).Slice()
		if err != nil {
			return fmt.Errorf("read event stream %s: %w", k.Events, err)
		}
		for _, m := range msgs {
			e, err := in.entry(m)
			if err != nil {
				return fmt.Errorf("read event stream %s: %w", k.Events, err)
			}
			s.Events = append(s.Events, e)
		}
		p.read(0, len(msgs))
		if len(msgs) < page {
			return nil
		}
		start = nextID(s.Events[len(s.Events)-1].ID)
	}
}

// interner keeps one copy of the strings events repeat (field names, and
// the values of repeatedFields), so 100,000 events do not hold 100,000
// copies of each. Other values (floors, times) are rarely the same, and
// looking each up cost more than it saved.
type interner map[string]string

// repeatedFields are the fields whose values recur across events: who
// wrote them and what kind they are.
var repeatedFields = map[string]bool{contract.FieldType: true, contract.FieldHost: true, contract.FieldPID: true, contract.FieldAddr: true,
	contract.FieldToken: true, contract.FieldFrom: true, contract.FieldTo: true, contract.FieldReason: true}

func (in interner) get(v string) string {
	if len(v) > 64 {
		return v
	}
	if c, ok := in[v]; ok {
		return c
	}
	if len(in) < 1<<16 {
		in[v] = v
	}
	return v
}

// entry parses one raw XRANGE entry: [id, [field, value, ...]].
func (in interner) entry(raw any) (Event, error) {
	m, ok := raw.([]any)
	if !ok || len(m) != 2 {
		return Event{}, fmt.Errorf("stream entry %v: want [id, fields]", raw)
	}
	id, _ := m[0].(string)
	kv, _ := m[1].([]any)
	e := Event{ID: id, MachineID: -1, Fields: make(Fields, 0, len(kv))}
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		v, _ := kv[i+1].(string)
		k = in.get(k)
		if repeatedFields[k] {
			v = in.get(v)
		}
		e.Fields = append(e.Fields, k, v)
	}
	e.Time, _ = entryTime(id)
	e.Type = e.Fields.Get(contract.FieldType)
	if mid, err := parseMachineID(e.Fields.Get(contract.FieldMachineID)); err == nil {
		e.MachineID = mid
	}
	return e, nil
}

// nextID is the smallest stream ID after id (exclusive ranges without the
// Redis 6.2 "(" syntax).
func nextID(id string) string {
	ms, seq, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseUint(seq, 10, 64)
	return ms + "-" + strconv.FormatUint(n+1, 10)
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
	return &Owner{Host: h[contract.OwnerHost], PID: atoi(h[contract.OwnerPID]), Addr: h[contract.OwnerAddr], Version: h[contract.OwnerVersion],
		Token: shortToken(h[contract.OwnerToken]), Node: h[contract.OwnerNode]}
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
var tokenFields = map[string]bool{contract.FieldToken: true, contract.FieldPrevToken: true, contract.FieldHolder: true, contract.FieldFenced: true,
	contract.OwnerFromToken: true}

func shortToken(t string) string {
	if len(t) > 8 {
		return t[:8]
	}
	return t
}

// details are an event's fields other than who wrote it, tokens shortened.
func (e Event) details() map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(e.Fields); i += 2 {
		k, v := e.Fields[i], e.Fields[i+1]
		switch k {
		case contract.FieldType, contract.FieldMachineID, contract.FieldHost, contract.FieldPID, contract.FieldAddr, contract.FieldToken:
			continue
		}
		if tokenFields[k] {
			v = shortToken(v)
		}
		out[k] = v
	}
	return out
}

// prevOwnerFields name the owner a claim replaced or a prune forgot
// (PrevOwner).
var prevOwnerFields = []string{contract.FieldPrevHost, contract.FieldPrevPID, contract.FieldPrevAddr, contract.FieldPrevToken}

// holderOf is the process a clone or fenced event names.
func holderOf(d map[string]string) Owner {
	return Owner{Host: d[contract.FieldHolderHost], PID: atoi(d[contract.FieldHolderPID]), Token: d[contract.FieldHolder]}
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
