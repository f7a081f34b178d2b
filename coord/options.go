package coord

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/replwait"
)

// Defaults of Options.
const (
	DefaultNamespace    = contract.DefaultNamespace
	DefaultLeaseTTL     = 10 * time.Second
	DefaultMaxSkew      = time.Second
	DefaultHorizon      = 5 * time.Second
	DefaultMaxWait      = 2 * time.Second
	DefaultEventsMaxLen = 100_000
)

// Limits of Options, named in its errors; flaked serve takes its flags'
// ranges from them. A lower limit not listed is 0.
const (
	MinLeaseTTL = time.Second
	MaxLeaseTTL = 10 * time.Minute
	MinMaxSkew  = time.Millisecond
	MaxMaxSkew  = time.Hour
	MaxHorizon  = time.Hour
	MaxMaxWait  = time.Hour
)

// ErrInvalidOptions is wrapped by option errors.
var ErrInvalidOptions = errors.New("invalid registry options")

// Owner describes the process holding a lease, as audit shows it.
type Owner struct {
	Host    string // default os.Hostname()
	PID     int    // default os.Getpid()
	Addr    string // address clients reach it at, if any
	Version string
	Mode    string // "flake" or "counter"; default "flake"
}

// Options configure a Registry. The zero value means the defaults.
type Options struct {
	// Namespace prefixes every key, inside a {hash tag}: letters, digits,
	// '.', '_', '-', 1..64 characters (contract.CheckNamespace). Default
	// "flaked".
	Namespace string
	// Layout is the fleet-wide ID layout; zero means flake.DefaultLayout().
	Layout flake.Layout
	// LeaseTTL is how long a lease lives without renewal: 1s..10m, default
	// 10s. Leases are renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// MaxSkew is how far the local clock may be from Redis TIME at a claim:
	// 1ms..1h, default 1s. Beyond it the claim fails with ErrClockSkew.
	MaxSkew time.Duration
	// Horizon bounds how far ahead of its clock any node of the fleet
	// reserves (reserve-ahead + max-lead + skew). After Redis loses its
	// data, IDs with no reservation record start this far after the
	// registry was re-created. 0..1h, default 5s.
	Horizon time.Duration
	// MaxWait: an ID whose reservation is ahead of our clock by more than
	// this is not claimed (the preferred one from the state file excepted).
	// 0..1h, default 2s.
	MaxWait time.Duration
	// EventsMaxLen caps the audit stream (XADD MAXLEN ~). Default 100000.
	EventsMaxLen int64
	// Owner describes this process.
	Owner Owner
	// Clock is the clock of the clock guard, lease renewals and waits;
	// nil means clock.System(). The simulator (package sim) sets its
	// virtual one.
	Clock clock.Clock
	// Rand is the source of owner tokens, generations and the machine IDs a
	// claim tries; nil means crypto/rand. The simulator sets a seeded one,
	// so a run is a function of its seed.
	Rand io.Reader
	// ReplicaWait bounds the WAIT after each claim and renewal: a grant is
	// used only once the replicas the fleet has had acknowledge it (see
	// Split brain in the package doc); one they do not acknowledge in time
	// is refused and retried. 10ms..10s, default 1s. No WAIT is sent
	// while the master has had no replicas.
	ReplicaWait time.Duration
	// MinReplicas is the fewest replicas every grant must reach, whatever
	// the fleet's high-water mark says: 0..MaxMinReplicas, 0 meaning the
	// mark alone. The mark starts from the replicas a master lists (none
	// on a master already cut off from them) and a promotion lowers it;
	// set MinReplicas to the replicas the deployment keeps up (one of
	// two, say) to close the split-brain trails of docs/model.md, at the
	// price that grants stop while fewer are online. flaked serve sets
	// DefaultMinReplicas(url) when --min-replicas is not given: 1 through
	// Sentinel (a go-redis failover client looks like any other client,
	// so a library user sets it).
	MinReplicas int
	// Sentinels, when set, are the Sentinels watching the master
	// (NewSentinels from a redis-sentinel:// URL): a grant made while
	// every one of them reports the master up is used without waiting for
	// the replicas, so a replica away, resyncing or lagging stops nothing
	// (Split brain in the package doc). flaked serve sets it from --redis.
	Sentinels Sentinels
	// Private says the Redis is this process's own embedded store (a
	// standalone node): nobody else can have written it, so there is no
	// layout settling and no loss to guard against (PrepareFresh marks it
	// so before the first claim), and the state file is the only
	// durable record, so a state file that cannot be written stops the
	// lease from granting ticks. Otherwise Redis holds the reservations and
	// such a failure is only reported (LeaseStats.StateErr).
	Private bool
	// RedisIdentity is how the writing scripts learn the Redis server's
	// identity (guard.lua): "" or contract.IdentityInfo reads INFO server
	// replication memory and refuses to write when it cannot, or when
	// maxmemory-policy is allkeys-*; contract.IdentityNone, the operator's
	// opt-in for a server that truly hides INFO (some proxies), reads
	// nothing, so Redis losing writes (a restart from an old snapshot, a
	// failover to a replica that missed writes) goes unnoticed and IDs
	// may repeat after one. A standalone node's embedded store sets it.
	RedisIdentity string
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if err := contract.CheckNamespace(o.Namespace); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.Layout.BitsTime == 0 {
		o.Layout = flake.DefaultLayout()
	}
	l, err := o.Layout.Validate()
	if err != nil {
		return o, fmt.Errorf("%w: layout: %w", ErrInvalidOptions, err)
	}
	o.Layout = l
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseTTL < MinLeaseTTL || o.LeaseTTL > MaxLeaseTTL {
		return o, fmt.Errorf("%w: lease TTL %v: valid range is %v..%v", ErrInvalidOptions, o.LeaseTTL, MinLeaseTTL, MaxLeaseTTL)
	}
	if o.MaxSkew == 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.MaxSkew < MinMaxSkew || o.MaxSkew > MaxMaxSkew {
		return o, fmt.Errorf("%w: max skew %v: valid range is %v..%v", ErrInvalidOptions, o.MaxSkew, MinMaxSkew, MaxMaxSkew)
	}
	if o.Horizon == 0 {
		o.Horizon = DefaultHorizon
	}
	if o.Horizon < 0 || o.Horizon > MaxHorizon {
		return o, fmt.Errorf("%w: horizon %v: valid range is 0..%v", ErrInvalidOptions, o.Horizon, MaxHorizon)
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxWait < 0 || o.MaxWait > MaxMaxWait {
		return o, fmt.Errorf("%w: max wait %v: valid range is 0..%v", ErrInvalidOptions, o.MaxWait, MaxMaxWait)
	}
	if o.EventsMaxLen == 0 {
		o.EventsMaxLen = DefaultEventsMaxLen
	}
	if o.EventsMaxLen < 100 {
		return o, fmt.Errorf("%w: events max length %d: must be >= 100", ErrInvalidOptions, o.EventsMaxLen)
	}
	if o.Owner.Host == "" {
		o.Owner.Host, _ = os.Hostname()
	}
	if o.Owner.PID == 0 {
		o.Owner.PID = os.Getpid()
	}
	if o.Owner.Mode == "" {
		o.Owner.Mode = "flake"
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if err := contract.CheckIdentity(o.RedisIdentity); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.ReplicaWait == 0 {
		o.ReplicaWait = replwait.DefaultTimeout
	}
	if o.MinReplicas < 0 || o.MinReplicas > MaxMinReplicas {
		return o, fmt.Errorf("%w: min replicas %d: valid range is 0..%d", ErrInvalidOptions, o.MinReplicas, MaxMinReplicas)
	}
	if o.ReplicaWait < replwait.MinTimeout || o.ReplicaWait > replwait.MaxTimeout {
		return o, fmt.Errorf("%w: replica wait %v: valid range is %v..%v", ErrInvalidOptions, o.ReplicaWait, replwait.MinTimeout, replwait.MaxTimeout)
	}
	return o, nil
}
