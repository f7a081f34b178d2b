package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
)

// chunk bounds the machine IDs read in one MULTI/EXEC, so a huge registry
// does not block Redis for long. Each ID's keys are always read together.
// page bounds every other reply (SSCAN, HSCAN, SCAN, XRANGE), so no read
// of a full 16-bit registry is one giant reply.
const (
	chunk = 2000
	page  = 1000
)

// afterList runs between listing the machine IDs and the first
// transaction; tests register an ID there.
var afterList = func() {}

// readAll reads the registry and the event stream. After the first
// transaction, which fixes the stream's last entry, the other machine IDs
// and the events are read at once on two connections: the client parses
// one while Redis answers the other.
func readAll(ctx context.Context, c *redis.Client, k contract.Keys, p *progress) (*Snapshot, error) {
	s, ids, err := readFirst(ctx, c, k, p)
	if err != nil {
		return nil, err
	}
	evErr := make(chan error, 1)
	go func() { evErr <- readEvents(ctx, c, k, s, p) }()
	idErr := s.readIDs(ctx, c, k, ids, p)
	if err := cmp.Or(idErr, <-evErr); err != nil {
		return nil, err
	}
	if err := readStreamInfo(ctx, c, k, s); err != nil {
		return nil, err
	}
	slices.Sort(s.Strays)
	return s, nil
}

// readFirst lists the machine IDs and reads the first chunk of them with
// the registry's own keys. It returns the IDs left to read.
func readFirst(ctx context.Context, c *redis.Client, k contract.Keys, p *progress) (*Snapshot, []string, error) {
	// Every script that adds a machine ID to the registry writes an event
	// naming it in the same call (claim). The events added
	// since this mark name every ID registered after the listing began.
	mark, err := lastEntry(ctx, c, k)
	if err != nil {
		return nil, nil, err
	}
	ids, err := listIDs(ctx, c, k, p)
	if err != nil {
		return nil, nil, err
	}
	afterList()
	s := &Snapshot{Namespace: k.Namespace, Records: map[int]*Record{}}
	var perID *idCmds
	for attempt := 0; ; attempt++ {
		var since []redis.XMessage
		perID, since, err = firstTx(ctx, c, k, s, ids[:min(len(ids), chunk)], mark)
		if err != nil {
			return nil, nil, err
		}
		// A machine ID registered between listing and the transaction is
		// read again, so its claim event never appears without its keys.
		if fresh := unlisted(ids, since); len(fresh) > 0 && attempt < 3 {
			ids = append(fresh, ids...)
			continue
		}
		break
	}
	if err := s.addRecords(perID); err != nil {
		return nil, nil, err
	}
	p.total(len(ids), min(len(ids), chunk), int(s.Stream.Length))
	return s, ids[min(len(ids), chunk):], nil
}

// readIDs reads the keys of machine IDs ids, chunk by chunk.
func (s *Snapshot) readIDs(ctx context.Context, c *redis.Client, k contract.Keys, ids []string, p *progress) error {
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(len(ids), start+chunk)]
		var perID *idCmds
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			perID = queueIDs(ctx, p, k, part)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read registry %q: %w", k.Namespace, err)
		}
		if err := s.addRecords(perID); err != nil {
			return err
		}
		p.read(len(part), 0)
	}
	return nil
}

// lastEntry is the ID of the stream's last entry, "0-0" when it is empty.
func lastEntry(ctx context.Context, c *redis.Client, k contract.Keys) (string, error) {
	m, err := c.XRevRangeN(ctx, k.Events, "+", "-", 1).Result()
	if err != nil {
		return "", fmt.Errorf("read event stream %s: %w", k.Events, err)
	}
	if len(m) == 0 {
		return "0-0", nil
	}
	return m[0].ID, nil
}

// firstTx reads, in one transaction, the registry's own keys, the first
// machine IDs' keys and the events written since mark, and fills in the
// snapshot's time, layout, meta and stream bounds. It returns the IDs'
// commands and those events.
func firstTx(ctx context.Context, c *redis.Client, k contract.Keys, s *Snapshot, ids []string, mark string) (*idCmds, []redis.XMessage, error) {
	var (
		timeCmd   *redis.TimeCmd
		layoutCmd *redis.StringCmd
		metaCmd   *redis.MapStringStringCmd
		sinceCmd  *redis.XMessageSliceCmd
		lastCmd   *redis.XMessageSliceCmd
		firstCmd  *redis.XMessageSliceCmd
		lenCmd    *redis.IntCmd
		perID     *idCmds
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		timeCmd = p.Time(ctx)
		layoutCmd = p.Get(ctx, k.Layout)
		metaCmd = p.HGetAll(ctx, k.Meta)
		// Only what was written during the listing: bounded by the
		// fleet's activity over a second or so, not by the stream.
		sinceCmd = p.XRange(ctx, k.Events, nextID(mark), "+")
		lastCmd = p.XRevRangeN(ctx, k.Events, "+", "-", 1)
		firstCmd = p.XRangeN(ctx, k.Events, "-", "+", 1)
		lenCmd = p.XLen(ctx, k.Events)
		perID = queueIDs(ctx, p, k, ids)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("read registry %q: %w", k.Namespace, err)
	}
	now, _ := timeCmd.Result()
	s.Now = now.UTC()
	s.LayoutText, s.Layout, s.LayoutErr = layoutCmd.Val(), flake.Layout{}, ""
	if s.LayoutText != "" {
		if l, err := flake.ParseLayout(s.LayoutText); err != nil {
			s.LayoutErr = err.Error()
		} else {
			s.Layout = l
		}
	}
	s.Meta = parseMeta(metaCmd.Val())
	s.Stream = Stream{Length: lenCmd.Val()}
	if m := lastCmd.Val(); len(m) > 0 {
		s.Stream.LastID = m[0].ID
	}
	if m := firstCmd.Val(); len(m) > 0 {
		s.Stream.FirstID = m[0].ID
	}
	return perID, sinceCmd.Val(), nil
}

// unlisted are the machine IDs the events name that ids does not hold.
func unlisted(ids []string, events []redis.XMessage) []string {
	if len(events) == 0 {
		return nil
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	var out []string
	for _, m := range events {
		id, ok := m.Values[contract.FieldMachineID].(string)
		if ok && id != "" && !listed[id] {
			listed[id] = true
			out = append(out, id)
		}
	}
	return out
}

// readStreamInfo tells whether the event stream is complete.
func readStreamInfo(ctx context.Context, c *redis.Client, k contract.Keys, s *Snapshot) error {
	if s.Stream.Length == 0 {
		// No event at all: complete only while there is no registry either.
		s.Stream.Complete = !s.Meta.Present
		return nil
	}
	info, err := c.XInfoStream(ctx, k.Events).Result()
	if err != nil {
		return fmt.Errorf("read event stream %s: %w", k.Events, err)
	}
	s.Stream.EntriesAdded = info.EntriesAdded
	// Nothing was ever trimmed or deleted, and the stream is as old as
	// the registry: the script that created {ns}:meta wrote its claim
	// event in the same call (XADD's clock may have moved on by a
	// millisecond or so; a stream deleted and begun again later is not
	// complete).
	first, _ := entryTime(s.Stream.FirstID)
	s.Stream.Complete = info.EntriesAdded > 0 && info.EntriesAdded == info.Length &&
		s.Meta.Present && first.Before(s.Meta.Created.Add(time.Second))
	return nil
}

// listIDs lists every machine-ID string any key of the namespace names,
// in pages (SSCAN, HSCAN, and one SCAN of the namespace's keys for both
// lease and owner keys: two would walk the whole keyspace twice), sorted.
func listIDs(ctx context.Context, c *redis.Client, k contract.Keys, p *progress) ([]string, error) {
	seen := map[string]bool{}
	scans := []struct {
		name  string
		it    *redis.ScanIterator
		pairs bool // HSCAN: field, value, field, value...
	}{
		{k.Machines, c.SScan(ctx, k.Machines, 0, "", page).Iterator(), false},
		{k.Reserved, c.HScan(ctx, k.Reserved, 0, "", page).Iterator(), true},
		{k.Prefix + "*", c.Scan(ctx, 0, k.Prefix+"*", page).Iterator(), false},
	}
	for _, sc := range scans {
		for i := 0; sc.it.Next(ctx); i++ {
			v := sc.it.Val()
			switch {
			case sc.pairs && i%2 == 1:
			case sc.name != k.Prefix+"*":
				seen[v] = true
			case strings.HasPrefix(v, k.LeasePrefix):
				seen[v[len(k.LeasePrefix):]] = true
			case strings.HasPrefix(v, k.OwnerPrefix):
				seen[v[len(k.OwnerPrefix):]] = true
			}
			if i%page == 0 {
				p.listed(len(seen))
			}
		}
		if err := sc.it.Err(); err != nil {
			return nil, fmt.Errorf("scan %s: %w", sc.name, err)
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// idCmds are the commands reading one chunk of machine IDs: each ID's
// lease and owner hash, and for the whole chunk at once its reservations
// (HMGET) and memberships (SMISMEMBER, Redis 6.2+): five commands an ID
// were twice the work for Redis and go-redis.
type idCmds struct {
	ids      []string
	lease    []*redis.StringCmd
	ttl      []*redis.DurationCmd
	owner    []*redis.MapStringStringCmd
	reserved *redis.SliceCmd
	member   *redis.BoolSliceCmd
}

func queueIDs(ctx context.Context, p redis.Pipeliner, k contract.Keys, ids []string) *idCmds {
	c := &idCmds{ids: ids, lease: make([]*redis.StringCmd, len(ids)), ttl: make([]*redis.DurationCmd, len(ids)),
		owner: make([]*redis.MapStringStringCmd, len(ids))}
	if len(ids) == 0 {
		return c
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		c.lease[i] = p.Get(ctx, k.Lease(id))
		c.ttl[i] = p.PTTL(ctx, k.Lease(id))
		c.owner[i] = p.HGetAll(ctx, k.Owner(id))
		args[i] = id
	}
	c.reserved = p.HMGet(ctx, k.Reserved, ids...)
	c.member = p.SMIsMember(ctx, k.Machines, args...)
	return c
}

func (s *Snapshot) addRecords(c *idCmds) error {
	if len(c.ids) == 0 {
		return nil
	}
	for _, cmd := range []redis.Cmder{c.reserved, c.member} {
		if err := cmd.Err(); err != nil {
			return fmt.Errorf("read machine IDs %s..%s: %w", c.ids[0], c.ids[len(c.ids)-1], err)
		}
	}
	reserved, member := c.reserved.Val(), c.member.Val()
	if len(reserved) != len(c.ids) || len(member) != len(c.ids) {
		return fmt.Errorf("read machine IDs: %d reservations and %d memberships for %d IDs", len(reserved), len(member), len(c.ids))
	}
	for i, sid := range c.ids {
		for _, cmd := range []redis.Cmder{c.lease[i], c.ttl[i], c.owner[i]} {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("read machine ID %q: %w", sid, err)
			}
		}
		id, err := parseMachineID(sid)
		if err != nil {
			s.Strays = append(s.Strays, sid)
			continue
		}
		r := &Record{MachineID: id, Registered: member[i], Lease: c.lease[i].Val()}
		if r.Lease != "" {
			r.LeaseTTL = c.ttl[i].Val() // -1 (no expiry) comes back as -1ns
			if r.LeaseTTL < 0 {
				r.LeaseTTL = -1
			}
		}
		if o := c.owner[i].Val(); len(o) > 0 {
			r.Owner = o
		}
		if v, ok := reserved[i].(string); ok {
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
