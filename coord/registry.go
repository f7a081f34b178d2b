package coord

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/bugs"
	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/statefile"
)

// Errors of the registry.
var (
	ErrLayoutMismatch = errors.New("layout differs from the fleet's")
	ErrClockSkew      = errors.New("clock is skewed from Redis TIME")
	ErrNoMachineID    = errors.New("no machine ID can be claimed")
	ErrLeaseLost      = errors.New("lease lost")
	ErrReleased       = errors.New("lease released")
	// ErrFenced is wrapped by the ErrLeaseLost of a lease taken over by a
	// process that presented this lease's token from a copy of the state
	// file: two processes run from one state file.
	ErrFenced = errors.New("fenced by a process started from a copy of this node's state file")
	// ErrPossibleLoss is wrapped with ErrLeaseLost when a renewal found
	// that Redis may have lost writes since the last one (it restarted or
	// failed over): nothing was extended, and the node claims again. What
	// the lease had already granted stays safe to issue meanwhile: every
	// grant made before the loss is below the loss floor, where any claim
	// after it starts (node keeps issuing under it).
	ErrPossibleLoss = errors.New("possible data loss")
	// ErrNoRegistry: the namespace has no registry ({ns}:meta and
	// {ns}:layout), and this registry never ran under it, so it cannot tell
	// a new fleet from a Redis that lost everything. flaked init (Init)
	// makes one; after a loss, a node that ran under it restores it.
	ErrNoRegistry = contract.ErrNoRegistry
)

var (
	claimScript   = redis.NewScript(contract.Claim)
	renewScript   = redis.NewScript(contract.Renew)
	releaseScript = redis.NewScript(contract.Release)
	checkScript   = redis.NewScript(contract.Check)
)

// Registry is the machine-ID registry of one namespace in one Redis.
type Registry struct {
	rdb  redis.UniversalClient
	opts Options
	keys contract.Keys
	wait replwait.Waiter // the WAIT after claims and renewals

	// known is set once this registry has run under the namespace's
	// registry (a claim, or a state file of its namespace and layout):
	// from then on its claims restore a registry Redis lost, which only
	// flaked init makes otherwise (guard.lua). fleetHorizon is the fleet's
	// horizon its last claim read, which a restore writes back.
	known        atomic.Bool
	fleetHorizon atomic.Int64
}

// NewRegistry validates opts and returns a registry on rdb. It does not
// talk to Redis until Claim.
func NewRegistry(rdb redis.UniversalClient, opts Options) (*Registry, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	keys := contract.NewKeys(o.Namespace)
	return &Registry{rdb: rdb, opts: o, keys: keys, wait: replwait.Waiter{Meta: keys.Meta, Floor: int64(o.MinReplicas), Sentinels: o.Sentinels, Clock: o.Clock,
		Marks: new(replwait.MarkMemory)}}, nil
}

// Options returns the registry's options with defaults filled in.
func (r *Registry) Options() Options { return r.opts }

// Client returns the Redis client.
func (r *Registry) Client() redis.UniversalClient { return r.rdb }

// Known reports whether this registry has run under the namespace's
// registry (a claim, or a state file of it), so restores it when Redis
// lost it.
func (r *Registry) Known() bool { return r.known.Load() }

// FleetHorizon returns the fleet's horizon ({ns}:meta, set by flaked init)
// as the last claim read it, 0 before any claim. Every reservation is
// capped at Redis TIME + it, so when it is shorter than Options.Horizon
// this node reaches less far than it was configured to.
func (r *Registry) FleetHorizon() time.Duration {
	return time.Duration(r.fleetHorizon.Load()) * r.opts.Layout.TimeUnit
}

// Layout returns the fleet layout this registry enforces.
func (r *Registry) Layout() flake.Layout { return r.opts.Layout }

// PrepareFresh makes the registry of an empty, private store
// (Options.Private: a standalone node's embedded one, made a moment ago)
// as one that has lost nothing, so the first claim does not wait out a
// loss floor: nobody but this process can have been granted a tick in it,
// and the state file carries this node's own reservation.
func (r *Registry) PrepareFresh(ctx context.Context) error {
	if !r.opts.Private {
		return fmt.Errorf("%w: PrepareFresh is only for a private store", ErrInvalidOptions)
	}
	if err := r.rdb.HSet(ctx, r.keys.Meta, contract.MetaGeneration, newToken(r.opts.Rand), contract.MetaServer, "", contract.MetaLossMs, 0,
		contract.MetaCreatedMs, r.opts.Clock.Now().UnixMilli(), contract.MetaHorizon, r.opts.horizonTicks()).Err(); err != nil {
		return err
	}
	return r.rdb.Set(ctx, r.keys.Layout, r.opts.Layout.String(), 0).Err()
}

// horizonTicks is Horizon in ticks of the layout, as the scripts take it.
func (o Options) horizonTicks() int64 { return int64(o.Horizon / o.Layout.TimeUnit) }

// tickMicros is the length of a tick in microseconds, as the scripts take
// it (with the epoch in microseconds) to turn Redis TIME into ticks.
func tickMicros(l flake.Layout) float64 { return float64(l.TimeUnit) / float64(time.Microsecond) }

// ClaimOptions tune one Claim.
type ClaimOptions struct {
	// Count is how many machine IDs to lease (default 1).
	Count int
	// State, when set, is the node's state file: the claim prefers the
	// machine IDs it names (when free or still ours), starts after its
	// reservation, and writes the new lease to it before returning.
	State *statefile.File
	// Previous is what State held when opened (nil when new).
	Previous *statefile.State
	// StartNow takes only IDs whose reservation is below our clock, so the
	// caller needs no floor (the sonyflake adapters: sonyflake cannot wait).
	StartNow bool
	// Prefer are machine IDs to take when free, when Previous names none
	// (a node claiming again after its lease was lost prefers the IDs it
	// held: their floor is its own reservation).
	Prefer []int
}

// Claim leases machine IDs. It checks the clock against Redis TIME first,
// then claims each ID with claim.lua under a new owner token: the lease's
// fencing identity, made here and never read from disk. On failure, IDs
// already claimed are released.
func (r *Registry) Claim(ctx context.Context, co ClaimOptions) (*Lease, error) {
	if co.Count == 0 {
		co.Count = 1
	}
	l := r.opts.Layout
	if co.Count < 1 || co.Count > l.LeasableMachineIDs() {
		return nil, fmt.Errorf("%w: %d machine IDs asked, valid range is 1..%d", ErrInvalidOptions, co.Count, l.LeasableMachineIDs())
	}
	lease := &Lease{reg: r, token: newToken(r.opts.Rand), floor: -1, mode: r.opts.Owner.Mode, lostCh: make(chan struct{}), lastOK: -1}
	req := claimRequest{localFloor: -1}
	var prefer []int
	if co.State != nil {
		req.node = co.State.Node()
		lease.nodeID = req.node
	}
	if p := co.Previous; p != nil {
		path := ""
		if co.State != nil {
			path = co.State.Path()
		}
		if err := p.Check(path, r.opts.Namespace, l.String()); err != nil {
			return nil, err
		}
		// A state file is written only after a claim under the
		// namespace's registry, with the layout stored there.
		r.known.Store(true)
		prefer, req.prevToken, req.localFloor = p.MachineIDs, p.Token, p.Reservation
		if bugs.StateFileToken {
			lease.token = p.Token
		}
	}
	if len(prefer) == 0 {
		prefer = co.Prefer
	}
	if err := r.checkClock(ctx); err != nil {
		return nil, err
	}
	for i := 0; i < co.Count; i++ {
		req.prefer = -1
		if i < len(prefer) {
			req.prefer = prefer[i]
		}
		req.startNow, req.taken = co.StartNow, lease.ids
		res, err := r.claimOne(ctx, lease.token, req)
		if err != nil {
			if len(lease.ids) > 0 {
				_ = lease.release(context.WithoutCancel(ctx), lease.floor)
			}
			return nil, err
		}
		lease.ids = append(lease.ids, res.id)
		lease.floor = max(lease.floor, res.floor)
		lease.generation = res.generation
		lease.events = append(lease.events, res.event)
		lease.Clone = cmp.Or(lease.Clone, res.clone)
		if lease.lastOK < 0 || res.redisMs < lease.lastOK {
			lease.lastOK = res.redisMs
		}
		if i == 0 {
			lease.lossID = res.lossID
		} else if res.lossID != lease.lossID {
			lease.lossID = "changed during the claim" // matches no loss ID: never extended
		}
		lease.horizon = max(lease.horizon, res.horizon, r.opts.horizonTicks())
		// A private store is new at every start: another generation there
		// is how it always is, not a loss.
		if p := co.Previous; p != nil && p.Generation != "" && p.Generation != res.generation && !lease.DataLoss && !r.opts.Private {
			lease.DataLoss = true
			r.event(ctx, contract.EventDataLoss, strconv.Itoa(res.id), contract.FieldPreviousGeneration, p.Generation, contract.FieldGeneration, res.generation,
				contract.FieldDetail, "registry generation differs from the state file's: Redis lost its data")
		}
	}
	lease.granted.Store(lease.floor)
	if co.State != nil {
		lease.state = co.State
		lease.mu.Lock()
		err := lease.saveLocked(lease.floor, false)
		lease.mu.Unlock()
		if err != nil && r.opts.Private {
			lease.state = nil
			_ = lease.release(context.WithoutCancel(ctx), lease.floor)
			return nil, err
		}
	}
	return lease, nil
}

// claimRequest is what one Claim asks of claim.lua besides the registry's
// options.
type claimRequest struct {
	prefer     int    // the state file's machine ID for this slot, or -1
	localFloor int64  // the state file's reservation, or -1
	prevToken  string // the state file's token: its lease may be taken over
	node       string // the state file's node ID
	startNow   bool   // only IDs startable at once (the sonyflake hooks)
	taken      []int  // IDs this Claim already holds
}

type claimResult struct {
	id         int
	floor      int64
	generation string
	event      string
	clone      string // "host pid" of a live process run from a copy of our state file
	redisMs    int64  // Redis TIME of the claim
	horizon    int64  // the fleet's horizon in {ns}:meta (ticks)
	lossID     string // guard.lua's name of the last possible data loss
}

// claimArgs are what one round of a claim gives claim.lua, its
// candidates drawn afresh. A registry that has not run under the
// namespace's sends no generation, so it cannot restore a registry.
func (r *Registry) claimArgs(token, gen, preferred string, now, maxWait int64, req claimRequest) contract.ClaimArgs {
	l, o := r.opts.Layout, r.opts.Owner
	if !r.known.Load() {
		gen = ""
	}
	return contract.ClaimArgs{
		Keys: r.keys, Token: token, Layout: l.String(), Generation: gen, Mark: r.wait.Mark(),
		Horizon: max(r.opts.horizonTicks(), r.fleetHorizon.Load()), Now: now, LeaseTTLMs: r.opts.LeaseTTL.Milliseconds(), EventsMaxLen: r.opts.EventsMaxLen,
		Preferred: preferred, LocalFloor: req.localFloor, MaxWait: maxWait,
		EpochUs: l.StartTime.UnixMicro(), TickUs: tickMicros(l), CounterID: l.CounterMachineID(),
		Host: o.Host, PID: o.PID, Addr: o.Addr, Version: o.Version, Mode: o.Mode,
		Skip: req.taken, PrevToken: req.prevToken, Node: req.node,
		MinID: l.MinMachineID(), MaxID: l.MaxMachineID(), Identity: r.opts.RedisIdentity,
		Candidates: candidates(r.opts.Rand, req.prefer, l.MinMachineID(), l.MaxMachineID(), req.taken),
	}
}

func (r *Registry) claimOne(ctx context.Context, token string, req claimRequest) (claimResult, error) {
	l := r.opts.Layout
	now := l.Tick(r.opts.Clock.Now())
	maxWait := int64(r.opts.MaxWait / l.TimeUnit)
	if req.startNow {
		maxWait = -1
	}
	preferred := ""
	if req.prefer >= l.MinMachineID() && req.prefer <= l.MaxMachineID() {
		preferred = strconv.Itoa(req.prefer)
	}
	gen := newToken(r.opts.Rand)
	for round := 0; round < rounds; round++ {
		keys, argv := r.claimArgs(token, gen, preferred, now, maxWait, req).KeysArgv()
		v, err := r.claimReplicated(ctx, token, keys, argv)
		if err != nil {
			return claimResult{}, fmt.Errorf("claim machine ID: %w", err)
		}
		switch v[0] {
		case "OK":
			id, _ := strconv.Atoi(fmt.Sprint(v[1]))
			res := claimResult{id: id, floor: toInt64(v[2]), generation: fmt.Sprint(v[3]), event: fmt.Sprint(v[4]),
				clone: fmt.Sprint(v[6]), redisMs: toInt64(v[7]), horizon: toInt64(v[8]), lossID: fmt.Sprint(v[9])}
			r.known.Store(true)
			r.fleetHorizon.Store(max(r.fleetHorizon.Load(), res.horizon))
			return res, nil
		case "NONE":
			// Free IDs exist but start later than allowed: when the soonest
			// is within MaxWait, wait for it rather than fail. A caller
			// that must start below the clock (StartNow: the sonyflake
			// hooks, which cannot wait later) waits as long as a loss floor
			// reaches (the horizon + the Redis clocks' skew: a registry
			// flaked init made a moment ago, or a Redis restart).
			soonest := toInt64(v[1])
			bound := r.opts.MaxWait
			if req.startNow {
				bound = max(bound, time.Duration(max(r.opts.horizonTicks(), r.fleetHorizon.Load())+1)*l.TimeUnit+contract.RedisSkew)
			}
			if soonest >= 0 && time.Duration(soonest+1-now)*l.TimeUnit <= bound {
				wait := l.TickTime(soonest + 1).Sub(r.opts.Clock.Now())
				if err := clock.Sleep(ctx, r.opts.Clock, max(wait, l.TimeUnit)); err != nil {
					return claimResult{}, fmt.Errorf("%w: waiting for tick %d: %w", ErrNoMachineID, soonest+1, err)
				}
				now = l.Tick(r.opts.Clock.Now())
				continue
			}
			if l.LeasableMachineIDs() <= smallSpace {
				// Every ID of a small space was a candidate: another
				// round would try the same ones.
				round = rounds
			}
		case "LAYOUT":
			return claimResult{}, fmt.Errorf("%w: the fleet in namespace %q uses %v, this node %s; start it with the fleet's layout flags",
				ErrLayoutMismatch, r.opts.Namespace, v[1], l.String())
		}
		preferred = "" // the preferred one is held by someone else
	}
	return claimResult{}, fmt.Errorf("%w: no free machine ID startable within %v found in namespace %q (layout allows %d%s)",
		ErrNoMachineID, r.opts.MaxWait, r.opts.Namespace, l.LeasableMachineIDs(), regionRange(l))
}

// A claim tries up to rounds batches of candidates. In a space smaller
// than smallSpace every ID is a candidate of every round.
const (
	rounds     = 8
	smallSpace = 64
)

// candidates are the IDs one claim round tries, all in lo..hi (the
// layout's region): the preferred one, then random ones (all of them,
// shuffled, when the space is small). The script adds random members of
// the registry, which finds released IDs when the space is crowded, and
// skips any outside lo..hi.
func candidates(rnd io.Reader, prefer, lo, hi int, taken []int) []int {
	var out []int
	if prefer >= lo && prefer <= hi && !containsInt(taken, prefer) {
		out = append(out, prefer)
	}
	n := hi - lo + 1
	if n <= smallSpace {
		for _, i := range randPerm(rnd, n) {
			if i+lo != prefer && !containsInt(taken, i+lo) {
				out = append(out, i+lo)
			}
		}
		return out
	}
	for len(out) < 16 {
		c := lo + randIntn(rnd, n)
		if !containsInt(taken, c) && !containsInt(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// regionRange says which machine IDs a layout with regions leases.
func regionRange(l flake.Layout) string {
	if l.BitsRegion == 0 {
		return ""
	}
	return fmt.Sprintf(" in region %d: %d..%d", l.Region, l.MinMachineID(), l.MaxMachineID())
}

// CheckClock compares the local wall clock (Options.Now) with Redis TIME,
// allowing for half the round trip: an error wrapping ErrClockSkew when
// they are more than MaxSkew apart (also written as a clock_skew event).
// Claim runs it first; a node in auto mode runs it while in flake mode.
func (r *Registry) CheckClock(ctx context.Context) error { return r.checkClock(ctx) }

func (r *Registry) checkClock(ctx context.Context) error {
	before := r.opts.Clock.Now()
	rt, err := r.rdb.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redis TIME: %w", err)
	}
	after := r.opts.Clock.Now()
	rtt := after.Sub(before)
	local := before.Add(rtt / 2)
	skew := local.Sub(rt)
	if skew.Abs() > r.opts.MaxSkew+rtt/2 {
		r.event(ctx, contract.EventClockSkew, "", contract.FieldSkewMs, skew.Milliseconds(), contract.FieldMaxSkewMs, r.opts.MaxSkew.Milliseconds())
		return fmt.Errorf("%w: local clock is %v off Redis TIME (max skew %v); fix NTP on this host or raise --max-skew",
			ErrClockSkew, skew.Round(time.Millisecond), r.opts.MaxSkew)
	}
	return nil
}

// event writes an audit event from Go (the scripts write their own),
// ignoring a failure: the caller is already reporting one.
func (r *Registry) event(ctx context.Context, kind, id string, kv ...any) {
	_ = r.addEvent(ctx, kind, id, kv)
}

// Event writes an audit event of this owner, e.g. a mode switch (kind
// and the names in kv: contract.Event* and contract.Field*).
func (r *Registry) Event(ctx context.Context, kind string, machineID int, kv ...any) error {
	return r.addEvent(ctx, kind, machineID, kv)
}

// addEvent writes an event of kind about machine ID id ("" for none), as
// written by this owner, with the fields kv.
func (r *Registry) addEvent(ctx context.Context, kind string, id any, kv []any) error {
	o := r.opts.Owner
	vals := append([]any{contract.FieldType, kind, contract.FieldMachineID, id, contract.FieldHost, o.Host, contract.FieldPID, o.PID,
		contract.FieldAddr, o.Addr}, kv...)
	return r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: r.keys.Events, MaxLen: r.opts.EventsMaxLen, Approx: true, Values: vals}).Err()
}

// newToken is a random 128-bit hex string from r.
func newToken(r io.Reader) string {
	b := make([]byte, 16)
	_, _ = io.ReadFull(r, b)
	return hex.EncodeToString(b)
}

func randIntn(r io.Reader, n int) int {
	var b [8]byte
	_, _ = io.ReadFull(r, b[:])
	return int(binary.BigEndian.Uint64(b[:]) % uint64(n))
}

func randPerm(r io.Reader, n int) []int {
	p := make([]int, n)
	for i := range p {
		j := randIntn(r, i+1)
		p[i] = p[j]
		p[j] = i
	}
	return p
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n
}

// MarkMemory is the replicas mark of the registry's last grant used, for
// the process's other grants to share (fallback.Options.Marks,
// seq.Options.Marks): a {ns}:meta Redis lost is restored with the
// process's last mark, whichever kind of grant used it.
func (r *Registry) MarkMemory() *replwait.MarkMemory { return r.wait.Marks }
