package node

import (
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/statefile"
)

// Defaults of Options.
const (
	DefaultCheckInterval = 100 * time.Millisecond
	DefaultRecoverAfter  = 3 * time.Second
	DefaultRetryInterval = time.Second
	// DefaultReserveAhead is long enough to ride out a Redis away for 11 s
	// (a node holds all of it but a second): a Sentinel failover, a pause
	// of the master, replies past the client's timeout. A restart after
	// kill -9 or a Redis restart costs no wait for it, since a new
	// generator starts at its floor once Redis grants past it; the price
	// is IDs that run up to the horizon (14 s) ahead of the clock for a
	// while after such a fault (docs/decisions.md).
	DefaultReserveAhead = 12 * time.Second
	// CloseTimeout is how long flaked serve gives Close, after its
	// --shutdown-timeout, to release the lease with the exact last tick: a
	// stop cut short before both leaves the lease to expire instead. Deploy
	// files' grace periods must cover both (deploy/ checks them).
	CloseTimeout = 5 * time.Second
)

// Limits of Options, checked by New and named in its errors; flaked serve
// takes its flags' ranges from them. A lower limit not listed is 0.
const (
	MaxMachineIDs    = 256
	MaxMaxLead       = time.Hour
	MinReserveAhead  = 10 * time.Millisecond
	MaxReserveAhead  = time.Hour
	MinCheckInterval = 10 * time.Millisecond
	MaxCheckInterval = time.Minute
	MaxRecoverAfter  = time.Hour
	MinRetryInterval = 10 * time.Millisecond
	MaxRetryInterval = time.Minute
	MaxIDWait        = time.Hour
)

// Options configure a Node. The zero value is a standalone node in flake
// mode with one machine ID and no state file.
type Options struct {
	// Redis is the fleet's Redis; nil runs standalone on an embedded
	// in-process store (miniredis): then the state file is what keeps
	// restarts unique, so set StateFile.
	Redis redis.UniversalClient
	// Registry configures the machine-ID registry (namespace, layout,
	// lease TTL, max skew, max wait, owner). Its Horizon defaults to
	// MaxLead + ReserveAhead + MaxSkew + one tick, and must be at least
	// that. Its MaxWait (default max(Horizon, MaxLead + ReserveAhead +
	// a tick) + 2s, so a registry restored after a data loss or a
	// restart after a crash is waited for) is also how far the clock may be behind the floor of
	// the machine IDs a node takes: beyond it the state file's IDs are
	// given back for others, and auto mode falls back to counter.
	Registry coord.Options
	// Counter tunes counter mode (segment sizes, lead); its namespace,
	// layout and clock come from Registry, and Known is set once the node
	// has run under the registry (a lease, or issued IDs).
	Counter fallback.Options
	// StateFile is the local state file ("" for none: restarts then rely
	// on Redis alone).
	StateFile string
	// Mode is ModeFlake (default), ModeCounter or ModeAuto.
	Mode Mode
	// MachineIDs is how many machine IDs to lease: 1..256, default 1. A
	// node with k IDs interleaves them and issues k times one ID's rate.
	MachineIDs int
	// MaxLead bounds how far ahead of the clock IDs may run when a tick's
	// sequence is used up: 0..1h, default 1s.
	MaxLead time.Duration
	// ReserveAhead is how far ahead each reservation reaches: 10ms..1h,
	// default 12s (DefaultReserveAhead).
	ReserveAhead time.Duration
	// CheckInterval is how often the node checks its health (lease,
	// reservation, clock) to switch modes: 10ms..1m, default 100ms.
	CheckInterval time.Duration
	// RecoverAfter is how long flake mode must look healthy before a node
	// in auto mode leaves counter mode (hysteresis, so it does not flap):
	// 0..1h, default 3s.
	RecoverAfter time.Duration
	// RetryInterval spaces attempts to claim machine IDs after a failure:
	// 10ms..1m, default 1s.
	RetryInterval time.Duration
	// IDWait is how long NextID and NextIDs wait for a source that cannot
	// issue now (claiming again, a reservation or counter segment not
	// granted yet, the clock behind a new floor) before they fail with an
	// error saying what the node waits for (wait.go): 0..1h, default 0,
	// which fails at once (a wait for the clock then follows the caller's
	// context). flaked serve sets it (--id-wait, 2s).
	IDWait time.Duration
	// Clock drives everything that takes time: the generator, the clock
	// guard, lease renewals, counter mode, the health checks and every
	// wait; nil means the system clock. The simulator (package sim) runs
	// whole nodes on its virtual one.
	Clock clock.Clock
	// StateFS holds the state file; nil means the operating system's
	// (statefile.OSFS). The simulator keeps state files in memory.
	StateFS statefile.FS
	// Rand is the source of owner tokens, state-file node IDs and the
	// machine IDs a claim tries; nil means crypto/rand.
	Rand io.Reader
	// Logger receives mode switches, lease losses and claims.
	Logger zerolog.Logger
}

func (o *Options) withDefaults() error {
	if o.Mode == ModeNone {
		o.Mode = ModeFlake
	}
	if !o.Mode.configurable() {
		return fmt.Errorf("%w: mode %q: want %s, %s or %s", ErrInvalidOptions, o.Mode, ModeFlake, ModeCounter, ModeAuto)
	}
	if o.MachineIDs == 0 {
		o.MachineIDs = 1
	}
	if o.MachineIDs < 1 || o.MachineIDs > MaxMachineIDs {
		return fmt.Errorf("%w: machine IDs %d: valid range is 1..%d", ErrInvalidOptions, o.MachineIDs, MaxMachineIDs)
	}
	for _, d := range []struct {
		v      *time.Duration
		def    time.Duration // what 0 means
		lo, hi time.Duration
		name   string
	}{
		{&o.MaxLead, flake.DefaultMaxLead, 0, MaxMaxLead, "max lead"},
		{&o.ReserveAhead, DefaultReserveAhead, MinReserveAhead, MaxReserveAhead, "reserve ahead"},
		{&o.CheckInterval, DefaultCheckInterval, MinCheckInterval, MaxCheckInterval, "check interval"},
		{&o.RecoverAfter, DefaultRecoverAfter, 0, MaxRecoverAfter, "recover after"},
		{&o.RetryInterval, DefaultRetryInterval, MinRetryInterval, MaxRetryInterval, "retry interval"},
		{&o.IDWait, 0, 0, MaxIDWait, "ID wait"},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < d.lo || *d.v > d.hi {
			return fmt.Errorf("%w: %s %v: valid range is %v..%v", ErrInvalidOptions, d.name, *d.v, d.lo, d.hi)
		}
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	return nil
}

// registryOptions is Registry completed by the node: its clock, randomness
// and mode, and the horizon and max wait its reach (MaxLead +
// ReserveAhead) calls for. standalone: the store is the node's embedded
// one, which only this process can ever see, and the state file holds the
// only reservation that matters, so the data-loss horizon is not needed.
func (o *Options) registryOptions(standalone bool) (coord.Options, error) {
	ro := o.Registry
	if ro.Clock == nil {
		ro.Clock = o.Clock
	}
	if ro.Rand == nil {
		ro.Rand = o.Rand
	}
	if ro.Owner.Mode == "" {
		ro.Owner.Mode = o.Mode.String()
		if o.Mode == ModeAuto {
			ro.Owner.Mode = ModeFlake.String()
		}
	}
	if standalone {
		// The embedded store has no run_id to read, and needs none:
		// nobody else writes it, and the state file is the record.
		ro.Private, ro.RedisIdentity = true, contract.IdentityNone
	}
	if ro.Layout.BitsTime == 0 {
		ro.Layout = flake.DefaultLayout()
	}
	minHorizon := o.MaxLead + o.ReserveAhead + max(ro.MaxSkew, coord.DefaultMaxSkew) + ro.Layout.TimeUnit
	if ro.Horizon == 0 {
		ro.Horizon = minHorizon
	}
	if ro.MaxWait == 0 {
		// A registry restored a moment ago (Redis lost its data) starts
		// every ID a horizon (and the Redis clocks' skew) ahead of the
		// loss, and a node restarted after a crash finds its own
		// reservation up to max lead + reserve ahead ahead of its clock:
		// wait for either.
		ro.MaxWait = max(ro.Horizon, o.MaxLead+o.ReserveAhead+ro.Layout.TimeUnit) + coord.DefaultMaxWait
	}
	if !standalone && ro.Horizon < minHorizon {
		return ro, fmt.Errorf("%w: horizon %v is below max lead + reserve ahead + max skew + a tick = %v",
			ErrInvalidOptions, ro.Horizon, minHorizon)
	}
	return ro, nil
}

// Horizon is the data-loss horizon a node with these options claims
// under: Registry.Horizon, or MaxLead + ReserveAhead + MaxSkew + a tick.
// flaked init makes it the fleet's, which caps every grant, so Redis
// grants past the loss floor of nodes with these options when init returns.
func (o Options) Horizon() (time.Duration, error) {
	if err := o.withDefaults(); err != nil {
		return 0, err
	}
	ro, err := o.registryOptions(false)
	return ro.Horizon, err
}

// counterOptions is Counter completed from the registry: counter mode
// shares its namespace, layout, randomness and owner, and the node's clock.
func (o *Options) counterOptions(reg *coord.Registry) fallback.Options {
	co := o.Counter
	co.Namespace, co.Layout, co.Clock, co.Rand = reg.Options().Namespace, reg.Layout(), o.Clock, reg.Options().Rand
	co.RedisIdentity = reg.Options().RedisIdentity
	if co.ReplicaWait == 0 {
		co.ReplicaWait = reg.Options().ReplicaWait
	}
	if co.MinReplicas == 0 {
		co.MinReplicas = reg.Options().MinReplicas
	}
	if co.Sentinels == nil {
		co.Sentinels = reg.Options().Sentinels
	}
	if co.Marks == nil {
		co.Marks = reg.MarkMemory()
	}
	if co.Host == "" {
		co.Host, co.PID = reg.Options().Owner.Host, reg.Options().Owner.PID
	}
	if co.Hold == 0 {
		// The reach that rides out a Redis outage in flake mode does in
		// counter mode too.
		co.Hold = max(fallback.DefaultHold, o.ReserveAhead)
	}
	if co.MaxLead == 0 {
		// What a counter node holds are values ahead of Redis TIME: a
		// segment runs from the tick of its fetch on, 2^seq bits values a
		// tick, and Redis hands out none past TIME + the lead. A lead of
		// a second held at most a second of the counter machine ID's rate
		// (25,600 IDs/s at the default layout: 2,560 IDs/s held for 10 s);
		// the reach of a flake reservation (max lead + reserve ahead) holds
		// the hold at any rate the counter machine ID sustains. After a
		// possible loss the counter restarts as far ahead (loss + skew +
		// lead), as claims start at loss + skew + horizon.
		co.MaxLead = max(fallback.DefaultMaxLead, o.MaxLead+o.ReserveAhead)
	}
	if co.MaxSegment == 0 {
		// A segment sized for twice the hold at the rate (nextSizeLocked)
		// is cut short by nothing but the lead: up to what the counter
		// machine ID issues in twice the hold.
		perSecond := int64(time.Second/co.Layout.TimeUnit) << co.Layout.BitsSequence
		co.MaxSegment = int(min(max(fallback.DefaultMaxSegment, int64(co.MinSegment), 2*int64(co.Hold/time.Second)*perSecond), fallback.SegmentLimit))
	}
	return co
}
