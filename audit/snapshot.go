package audit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redisinfo"
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
	return ReadWith(ctx, rdb, ns, ReadOptions{})
}

// ReadWith is Read with options: progress lines for a large registry.
func ReadWith(ctx context.Context, rdb redis.UniversalClient, ns string, o ReadOptions) (*Snapshot, error) {
	s, _, _, err := read(ctx, rdb, ns, o)
	return s, err
}

// read is ReadWith, also returning the namespace's keys and the client
// that serves its slot, for callers that go on to write (Prune).
func read(ctx context.Context, rdb redis.UniversalClient, ns string, o ReadOptions) (*Snapshot, contract.Keys, *redis.Client, error) {
	k, err := keysOf(ns)
	if err != nil {
		return nil, k, nil, err
	}
	// Every key of the namespace is in the {ns} slot: the master of one
	// serves them all, so SCAN and MULTI/EXEC see all of them.
	c, err := redisinfo.Master(ctx, rdb, k.Machines)
	if err != nil {
		return nil, k, nil, err
	}
	s, err := readAll(ctx, c, k, o.progress())
	if err != nil {
		return nil, k, nil, err
	}
	return s, k, c, nil
}

// keysOf returns the keys of namespace ns ("" for the default), refusing
// a namespace the registry refuses.
func keysOf(ns string) (contract.Keys, error) {
	if ns == "" {
		ns = contract.DefaultNamespace
	}
	if err := contract.CheckNamespace(ns); err != nil {
		return contract.Keys{}, fmt.Errorf("%w: %w", coord.ErrInvalidOptions, err)
	}
	return contract.NewKeys(ns), nil
}

func parseMeta(h map[string]string) Meta {
	if len(h) == 0 {
		return Meta{}
	}
	m := Meta{Present: true, Generation: h[contract.MetaGeneration]}
	if ms, err := strconv.ParseInt(h[contract.MetaCreatedMs], 10, 64); err == nil {
		m.Created = time.UnixMilli(ms).UTC()
	}
	m.CreatedTick, _ = strconv.ParseInt(h[contract.MetaCreatedTick], 10, 64)
	m.Horizon, _ = strconv.ParseInt(h[contract.MetaHorizon], 10, 64)
	m.Server = h[contract.MetaServer]
	// loss_ms 0 is a store that lost nothing (coord.PrepareFresh).
	if t, ok := msTime(h[contract.MetaLossMs]); ok {
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
func (s *Snapshot) keys() contract.Keys { return contract.NewKeys(s.Namespace) }

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
