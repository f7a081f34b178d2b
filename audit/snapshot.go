package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/scripts/lua"
)

// Snapshot is what one namespace of the registry held at one moment.
type Snapshot struct {
	Namespace string
	// Now is Redis TIME at the read: the clock every age is measured by.
	Now time.Time
	// LayoutText is {ns}:layout as stored ("" when missing); Layout is it
	// parsed (zero when missing or invalid, then LayoutErr says why).
	LayoutText string
	Layout     flake.Layout
	LayoutErr  string
	Meta       Meta
	// Records holds every machine ID named by a key of the namespace: a
	// member of {ns}:machines, a lease, an owner hash or a reservation.
	Records map[int]*Record
	// Strays are set members, reservation fields and keys whose machine ID
	// part is not a machine ID.
	Strays []string
	// Events is the event stream up to the moment of the read, oldest
	// first.
	Events []Event
	Stream Stream

	byID    map[int][]int32 // positions in Events by machine ID (eventsOf)
	indexed int             // len(Events) when byID was built
}

// Meta is {ns}:meta, the registry's generation record.
type Meta struct {
	Present     bool
	Generation  string
	Created     time.Time // when the registry was (re)created
	CreatedTick int64
	Horizon     int64 // ticks
	// Server is the identity (run_id:master_replid) of the Redis server
	// that last wrote the registry: the scripts compare it to their own
	// to notice a restart or failover (guard.lua). "" when the server
	// does not tell, or the store is a standalone node's own.
	Server string
	// LossAt is the last moment Redis may have lost acknowledged writes
	// (loss_ms, Redis TIME): a restart or failover, or the registry
	// (re)created. Claims start a horizon after it. Zero when the registry
	// has recorded none.
	LossAt time.Time
}

// Causes of a possible data loss (Meta.LossCause).
const (
	// LossCreated: {ns}:meta was missing, so the registry was made anew: a
	// new fleet, or Redis lost everything.
	LossCreated = "created"
	// LossServer: the Redis server's identity changed (a restart, or a
	// failover to a replica that may have missed writes).
	LossServer = "server"
)

// LossCause says what LossAt records, "" when there is no loss. The
// scripts set loss_ms to created_ms when they make {ns}:meta, and raise it
// on a change of server.
func (m Meta) LossCause() string {
	switch {
	case m.LossAt.IsZero():
		return ""
	case !m.LossAt.After(m.Created):
		return LossCreated
	}
	return LossServer
}

// UnknownFloor is the floor a claim gives a machine ID without a
// reservation record under layout l: the loss floor, the last possible
// data loss + horizon (claim.lua), at least registry creation + horizon
// (the scripts record a loss when they make {ns}:meta), or -1 when
// {ns}:meta is missing. A reservation lost with Redis's data is covered
// by the loss floor, not by the creation.
func (m Meta) UnknownFloor(l flake.Layout) int64 {
	if !m.Present {
		return -1
	}
	f := m.CreatedTick + m.Horizon
	if !m.LossAt.IsZero() && l.BitsTime != 0 {
		f = max(f, l.Tick(m.LossAt)+m.Horizon)
	}
	return f
}

// Record is what the registry holds about one machine ID.
type Record struct {
	MachineID  int
	Registered bool // member of {ns}:machines
	// Lease is the owner token in {ns}:lease:<id> ("" when there is no
	// lease); LeaseTTL is the time it has left, -1 when it never expires.
	Lease    string
	LeaseTTL time.Duration
	// Owner is {ns}:owner:<id> (nil when missing): host, pid, addr,
	// version, started, heartbeat, mode, token, state, claimed,
	// first_claim, floor, released, node (the state-file node ID, "" for
	// a process without a state file) and from_token (the token the
	// claimer's state file held). HGETALL reads every field, in the same
	// transaction as the lease.
	Owner       map[string]string
	Reserved    int64 // {ns}:reserved field, valid when HasReserved
	HasReserved bool
}

// Stream describes the event stream at the read.
type Stream struct {
	Length       int64
	EntriesAdded int64 // every entry ever added (Redis 7+; 0 when unknown)
	// Complete is true when no entry was ever trimmed or deleted, so the
	// events reach back to the first one written.
	Complete bool
	FirstID  string
	LastID   string
}

// Read takes a snapshot of namespace ns ("" for the default). On Redis
// Cluster every command goes to the master of the namespace's slot.
func Read(ctx context.Context, rdb redis.UniversalClient, ns string) (*Snapshot, error) {
	s, _, _, err := read(ctx, rdb, ns)
	return s, err
}

// read is Read, also returning the namespace's keys and the client that
// serves its slot, for callers that go on to write (Prune).
func read(ctx context.Context, rdb redis.UniversalClient, ns string) (*Snapshot, lua.Keys, *redis.Client, error) {
	k, err := keysOf(ns)
	if err != nil {
		return nil, k, nil, err
	}
	c, err := slotClient(ctx, rdb, k)
	if err != nil {
		return nil, k, nil, err
	}
	s, err := readKeys(ctx, c, k)
	if err != nil {
		return nil, k, nil, err
	}
	if err := readEvents(ctx, c, k, s); err != nil {
		return nil, k, nil, err
	}
	return s, k, c, nil
}

// keysOf returns the keys of namespace ns ("" for the default), refusing
// a namespace the registry refuses.
func keysOf(ns string) (lua.Keys, error) {
	if ns == "" {
		ns = lua.DefaultNamespace
	}
	if err := lua.CheckNamespace(ns); err != nil {
		return lua.Keys{}, fmt.Errorf("%w: %w", coord.ErrInvalidOptions, err)
	}
	return lua.NewKeys(ns), nil
}

// slotClient returns the client that serves every key of the namespace:
// rdb itself, or on Cluster the master of the {ns} slot, so that SCAN and
// MULTI/EXEC see all of them.
func slotClient(ctx context.Context, rdb redis.UniversalClient, k lua.Keys) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, k.Machines)
		if err != nil {
			return nil, fmt.Errorf("find the cluster node of slot {%s}: %w", k.Namespace, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("redis client %T: want a standalone, Sentinel or Cluster client", rdb)
}

// chunk bounds the machine IDs read in one MULTI/EXEC, so a huge registry
// does not block Redis for long. Each ID's keys are always read together.
const chunk = 2000

func readKeys(ctx context.Context, c *redis.Client, k lua.Keys) (*Snapshot, error) {
	ids, err := listIDs(ctx, c, k)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Namespace: k.Namespace, Records: map[int]*Record{}}
	for attempt := 0; ; attempt++ {
		first := ids[:min(len(ids), chunk)]
		var (
			timeCmd   *redis.TimeCmd
			layoutCmd *redis.StringCmd
			metaCmd   *redis.MapStringStringCmd
			membCmd   *redis.StringSliceCmd
			lastCmd   *redis.XMessageSliceCmd
			firstCmd  *redis.XMessageSliceCmd
			lenCmd    *redis.IntCmd
			perID     []idCmds
		)
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			timeCmd = p.Time(ctx)
			layoutCmd = p.Get(ctx, k.Layout)
			metaCmd = p.HGetAll(ctx, k.Meta)
			membCmd = p.SMembers(ctx, k.Machines)
			lastCmd = p.XRevRangeN(ctx, k.Events, "+", "-", 1)
			firstCmd = p.XRangeN(ctx, k.Events, "-", "+", 1)
			lenCmd = p.XLen(ctx, k.Events)
			perID = queueIDs(ctx, p, k, first)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read registry %q: %w", k.Namespace, err)
		}
		// A machine ID registered between listing and the transaction is
		// read again, so its claim event never appears without its keys.
		if fresh := missing(ids, membCmd.Val()); len(fresh) > 0 && attempt < 3 {
			ids = append(ids, fresh...)
			continue
		}
		now, _ := timeCmd.Result()
		s.Now = now.UTC()
		s.LayoutText = layoutCmd.Val()
		if s.LayoutText != "" {
			if l, err := flake.ParseLayout(s.LayoutText); err != nil {
				s.LayoutErr = err.Error()
			} else {
				s.Layout = l
			}
		}
		s.Meta = parseMeta(metaCmd.Val())
		if m := lastCmd.Val(); len(m) > 0 {
			s.Stream.LastID = m[0].ID
		}
		if m := firstCmd.Val(); len(m) > 0 {
			s.Stream.FirstID = m[0].ID
		}
		s.Stream.Length = lenCmd.Val()
		if err := s.addRecords(perID); err != nil {
			return nil, err
		}
		break
	}
	for rest := ids[min(len(ids), chunk):]; len(rest) > 0; rest = rest[min(len(rest), chunk):] {
		part := rest[:min(len(rest), chunk)]
		var perID []idCmds
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			perID = queueIDs(ctx, p, k, part)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read registry %q: %w", k.Namespace, err)
		}
		if err := s.addRecords(perID); err != nil {
			return nil, err
		}
	}
	if s.Stream.Length > 0 {
		info, err := c.XInfoStream(ctx, k.Events).Result()
		if err != nil {
			return nil, fmt.Errorf("read event stream %s: %w", k.Events, err)
		}
		s.Stream.EntriesAdded = info.EntriesAdded
		// Nothing was ever trimmed or deleted, and the stream is as old as
		// the registry: the script that created {ns}:meta wrote its claim
		// event in the same call (XADD's clock may have moved on by a
		// millisecond or so; a stream deleted and begun again later is
		// not complete).
		first, _ := entryTime(s.Stream.FirstID)
		s.Stream.Complete = info.EntriesAdded > 0 && info.EntriesAdded == info.Length &&
			s.Meta.Present && first.Before(s.Meta.Created.Add(time.Second))
	} else {
		// No event at all: complete only while there is no registry either.
		s.Stream.Complete = !s.Meta.Present
	}
	slices.Sort(s.Strays)
	return s, nil
}

// listIDs lists every machine-ID string any key of the namespace names.
func listIDs(ctx context.Context, c *redis.Client, k lua.Keys) ([]string, error) {
	seen := map[string]bool{}
	members, err := c.SMembers(ctx, k.Machines).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Machines, err)
	}
	for _, m := range members {
		seen[m] = true
	}
	fields, err := c.HKeys(ctx, k.Reserved).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Reserved, err)
	}
	for _, f := range fields {
		seen[f] = true
	}
	for _, prefix := range []string{k.LeasePrefix, k.OwnerPrefix} {
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			seen[strings.TrimPrefix(it.Val(), prefix)] = true
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("scan %s*: %w", prefix, err)
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

func missing(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

type idCmds struct {
	id       string
	lease    *redis.StringCmd
	ttl      *redis.DurationCmd
	owner    *redis.MapStringStringCmd
	reserved *redis.StringCmd
	member   *redis.BoolCmd
}

func queueIDs(ctx context.Context, p redis.Pipeliner, k lua.Keys, ids []string) []idCmds {
	out := make([]idCmds, len(ids))
	for i, id := range ids {
		out[i] = idCmds{
			id:       id,
			lease:    p.Get(ctx, k.Lease(id)),
			ttl:      p.PTTL(ctx, k.Lease(id)),
			owner:    p.HGetAll(ctx, k.Owner(id)),
			reserved: p.HGet(ctx, k.Reserved, id),
			member:   p.SIsMember(ctx, k.Machines, id),
		}
	}
	return out
}

func (s *Snapshot) addRecords(cmds []idCmds) error {
	for _, c := range cmds {
		for _, cmd := range []redis.Cmder{c.lease, c.ttl, c.owner, c.reserved, c.member} {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("read machine ID %q: %w", c.id, err)
			}
		}
		id, err := parseMachineID(c.id)
		if err != nil {
			s.Strays = append(s.Strays, c.id)
			continue
		}
		r := &Record{MachineID: id, Registered: c.member.Val(), Lease: c.lease.Val()}
		if r.Lease != "" {
			r.LeaseTTL = c.ttl.Val() // -1 (no expiry) comes back as -1ns
			if r.LeaseTTL < 0 {
				r.LeaseTTL = -1
			}
		}
		if o := c.owner.Val(); len(o) > 0 {
			r.Owner = o
		}
		if v, err := c.reserved.Result(); err == nil {
			n, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil {
				s.Strays = append(s.Strays, fmt.Sprintf("reservation of %d: %q", id, v))
			} else {
				r.Reserved, r.HasReserved = n, true
			}
		}
		if !r.Registered && r.Lease == "" && r.Owner == nil && !r.HasReserved {
			continue // the keys went away between listing and reading
		}
		s.Records[id] = r
	}
	return nil
}

func parseMeta(h map[string]string) Meta {
	if len(h) == 0 {
		return Meta{}
	}
	m := Meta{Present: true, Generation: h[lua.MetaGeneration]}
	if ms, err := strconv.ParseInt(h[lua.MetaCreatedMs], 10, 64); err == nil {
		m.Created = time.UnixMilli(ms).UTC()
	}
	m.CreatedTick, _ = strconv.ParseInt(h[lua.MetaCreatedTick], 10, 64)
	m.Horizon, _ = strconv.ParseInt(h[lua.MetaHorizon], 10, 64)
	m.Server = h[lua.MetaServer]
	// loss_ms 0 is a store that lost nothing (coord.PrepareFresh).
	if t, ok := msTime(h[lua.MetaLossMs]); ok {
		m.LossAt = t
	}
	return m
}

// parseMachineID reads a machine ID as the scripts write it: a canonical
// non-negative decimal.
func parseMachineID(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a machine ID", s)
	}
	return n, nil
}

// keys are the keys of the snapshot's namespace, for the reports that name
// them.
func (s *Snapshot) keys() lua.Keys { return lua.NewKeys(s.Namespace) }

// ownerKey is the owner hash of machine ID id.
func (s *Snapshot) ownerKey(id int) string { return s.keys().Owner(strconv.Itoa(id)) }

// sortedRecords returns the records by machine ID.
func (s *Snapshot) sortedRecords() []*Record {
	out := make([]*Record, 0, len(s.Records))
	for _, r := range s.Records {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Record) int { return a.MachineID - b.MachineID })
	return out
}
