package fallback

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

// Defaults and limits of Options.
const (
	DefaultNamespace  = contract.DefaultNamespace
	DefaultMinSegment = 64
	DefaultMaxSegment = 65536
	DefaultMaxLead    = time.Second
	DefaultHold       = 10 * time.Second
	MinHold           = time.Second
	MaxHold           = time.Hour
	// SegmentLimit is the largest segment size counter.lua accepts.
	SegmentLimit = 1 << 24
	// MaxLeadLimit is the largest MaxLead.
	MaxLeadLimit = time.Hour
)

// ErrInvalidOptions is wrapped by every option error; the text names the
// valid range.
var ErrInvalidOptions = errors.New("invalid counter options")

// Options configure a Counter. The zero value means the defaults.
type Options struct {
	// Namespace prefixes the key {ns}:counter: letters, digits, '.', '_',
	// '-', 1..64 characters (contract.CheckNamespace). Default "flaked".
	Namespace string
	// Layout is the fleet-wide ID layout; zero means flake.DefaultLayout().
	Layout flake.Layout
	// MinSegment and MaxSegment bound how many values one trip to Redis
	// fetches: 1 <= MinSegment <= MaxSegment <= SegmentLimit; defaults 64
	// and 65536. Within them the size follows the observed rate, so that a
	// segment lasts about 2 x Hold.
	MinSegment int
	MaxSegment int
	// Hold is how long a Redis outage the counter rides out at a steady
	// rate: the next segment is fetched when half of the current one is
	// left, so the counter holds at least Hold of IDs (fewer where
	// MaxSegment caps a segment). 1s..1h, default 10 s; a node passes its
	// ReserveAhead when that is longer, so both modes ride out the same
	// outage.
	Hold time.Duration
	// MaxLead bounds how far ahead of Redis TIME the counter may run when
	// the rate exceeds 2^BitsSequence IDs per tick: 0..1h, 0 means 1 s.
	// Less than one tick means it never runs ahead. After Redis loses the
	// counter, it restarts this far ahead of Redis TIME (plus one tick).
	MaxLead time.Duration
	// Clock measures the rate, checks the epoch and runs fetches and
	// waits; nil means clock.System(). The simulator (package sim)
	// sets its virtual one.
	Clock clock.Clock
	// Rand makes the registry generation a fetch creates {ns}:meta with
	// when it finds none; nil means crypto/rand.
	Rand io.Reader
	// EventsMaxLen caps the audit stream {ns}:events (XADD MAXLEN ~),
	// where a counter (re)created from its floor is recorded: >= 100,
	// default 100000.
	EventsMaxLen int64
	// Host and PID name this process in audit events; defaults
	// os.Hostname() and os.Getpid().
	Host string
	PID  int
	// Known says the caller has run under the namespace's registry (a
	// node whose lease or state file did): the counter then restores a
	// registry Redis lost, as it does once it has had a segment
	// (Counter.known). Otherwise a namespace without a registry is refused
	// (ErrNoRegistry) until flaked init makes one.
	Known bool
	// RedisIdentity is coord.Options.RedisIdentity, for counter.lua's
	// guard (a node passes its registry's).
	RedisIdentity string
	// ReplicaWait bounds the WAIT after each segment: a segment is used
	// only once the replicas the fleet has had acknowledge it
	// (coord.Options.ReplicaWait, which a node passes here). 10ms..1s,
	// default 200ms.
	ReplicaWait time.Duration
	// MinReplicas is coord.Options.MinReplicas: the fewest replicas every
	// segment must reach (a node passes its registry's).
	MinReplicas int
	// Sentinels is coord.Options.Sentinels: segments the Sentinels vouch
	// for are used without waiting for the replicas.
	Sentinels replwait.Sentinels
	// Marks is the process's replicas mark of its last grant used
	// (coord.Registry.MarkMemory, which a node passes here): the counter
	// restores a {ns}:meta Redis lost with it. nil: the counter's own.
	Marks *replwait.MarkMemory
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if err := contract.CheckNamespace(o.Namespace); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
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
	if o.ReplicaWait < replwait.MinTimeout || o.ReplicaWait > replwait.MaxTimeout {
		return o, fmt.Errorf("%w: replica wait %v: valid range is %v..%v", ErrInvalidOptions, o.ReplicaWait, replwait.MinTimeout, replwait.MaxTimeout)
	}
	if o.EventsMaxLen == 0 {
		o.EventsMaxLen = 100000
	}
	if o.EventsMaxLen < 100 {
		return o, fmt.Errorf("%w: events max length %d: must be >= 100", ErrInvalidOptions, o.EventsMaxLen)
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
	if o.Layout == (flake.Layout{}) {
		o.Layout = flake.DefaultLayout()
	} else {
		l, err := o.Layout.Validate()
		if err != nil {
			return o, fmt.Errorf("%w: layout: %w", ErrInvalidOptions, err)
		}
		o.Layout = l
	}
	if tick := o.Layout.Tick(o.Clock.Now()); tick < 0 || tick > o.Layout.MaxTick() {
		return o, fmt.Errorf("%w: layout %v: now is tick %d, valid range is 0..%d (epoch ahead of now, or the time bits are used up)",
			ErrInvalidOptions, o.Layout, tick, o.Layout.MaxTick())
	}
	if o.MinSegment == 0 {
		o.MinSegment = DefaultMinSegment
	}
	if o.MaxSegment == 0 {
		o.MaxSegment = max(DefaultMaxSegment, o.MinSegment)
	}
	if o.MaxSegment < 1 || o.MaxSegment > SegmentLimit {
		return o, fmt.Errorf("%w: max segment %d: valid range is 1..%d", ErrInvalidOptions, o.MaxSegment, SegmentLimit)
	}
	if o.MinSegment < 1 || o.MinSegment > o.MaxSegment {
		return o, fmt.Errorf("%w: min segment %d: valid range is 1..%d (the max segment)", ErrInvalidOptions, o.MinSegment, o.MaxSegment)
	}
	if o.Hold == 0 {
		o.Hold = DefaultHold
	}
	if o.Hold < MinHold || o.Hold > MaxHold {
		return o, fmt.Errorf("%w: hold %v: valid range is %v..%v", ErrInvalidOptions, o.Hold, MinHold, MaxHold)
	}
	if o.MaxLead == 0 {
		o.MaxLead = DefaultMaxLead
	}
	if o.MaxLead < 0 || o.MaxLead > MaxLeadLimit {
		return o, fmt.Errorf("%w: max lead %v: valid range is 0..%v (0 means %v)", ErrInvalidOptions, o.MaxLead, MaxLeadLimit, DefaultMaxLead)
	}
	return o, nil
}
