package seq

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/replwait"
)

// ErrInvalidOptions is wrapped by option errors; the text names the valid
// range.
var ErrInvalidOptions = errors.New("invalid sequence options")

// Options configure Sequences. The zero value means the defaults.
type Options struct {
	// Namespace prefixes the keys {ns}:seq:<tag> and {ns}:seqs; default
	// "flaked" (contract.CheckNamespace).
	Namespace string
	// PrefetchAt is the fraction of a segment used when the next one is
	// fetched: (0, 1], 0 means 0.1 (Leaf's 10%).
	PrefetchAt float64
	// Clock runs fetches and waits; nil means clock.System().
	Clock clock.Clock
	// Rand makes the generation a call restores {ns}:meta with when Redis
	// lost it; nil means crypto/rand.
	Rand io.Reader
	// EventsMaxLen caps {ns}:events: >= 100, default 100000.
	EventsMaxLen int64
	// Host and PID name this process in events; defaults os.Hostname()
	// and os.Getpid().
	Host string
	PID  int
	// RedisIdentity is coord.Options.RedisIdentity, for guard.lua at the
	// start of seq.lua: "" (contract.IdentityInfo) or contract.IdentityNone.
	RedisIdentity string
	// MinReplicas is coord.Options.MinReplicas: the fewest replicas every
	// segment must reach, whatever the fleet's mark says.
	MinReplicas int
	// Sentinels is coord.Options.Sentinels: segments the Sentinels vouch
	// for are used without waiting for the replicas.
	Sentinels replwait.Sentinels
	// Marks is fallback.Options.Marks, for sequences.
	Marks *replwait.MarkMemory
	// Known says the caller has run under the namespace's registry (a node
	// that started): it then restores {ns}:meta if Redis lost it, as it
	// does once seq.lua has answered it. Otherwise a namespace without a
	// registry is refused (ErrNoRegistry) until flaked init makes one.
	Known bool
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = contract.DefaultNamespace
	}
	if err := contract.CheckNamespace(o.Namespace); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err := contract.CheckIdentity(o.RedisIdentity); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.PrefetchAt == 0 {
		o.PrefetchAt = 0.1
	}
	if !(o.PrefetchAt > 0 && o.PrefetchAt <= 1) {
		return o, fmt.Errorf("%w: prefetch at %v: valid range is (0, 1]", ErrInvalidOptions, o.PrefetchAt)
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
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
	return o, nil
}

// Defaults of TagOptions.
const (
	DefaultStep = 1000
	DefaultRate = 1_000_000
	// MaxValue is the largest value of a sequence, 2^53 - 1 (exact in
	// JavaScript's Numbers and in Lua).
	MaxValue = contract.SeqMaxValue
	// MaxStep is the largest step.
	MaxStep = 1 << 24
)

// TagOptions are a tag's settings, fixed when it is created. The zero
// value means the defaults.
type TagOptions struct {
	// Start is the first value: 1..MaxValue, 0 means 1.
	Start int64 `json:"start"`
	// Step is the smallest segment processes take: 1..2^24, 0 means
	// 1000 (under load a process takes more, about 50-100 ms of its
	// traffic). A crash skips up to two segments per process (the one in
	// use and the one fetched ahead); a clean stop gives them back.
	Step int64 `json:"step"`
	// Max is the last value handed out, 0 for none (MaxValue). Past it
	// NEXTSEQ fails with ErrMaxReached.
	Max int64 `json:"max"`
	// Rate bounds how many values per second the tag hands out, over all
	// processes: 1..MaxValue, 0 means 1,000,000. After Redis loses writes
	// the tag continues above what this rate allows since the surviving
	// copy: the gap a loss costs is about Rate × (the copy's age + 1 s).
	Rate int64 `json:"rate"`
	// Burst is how many values may be handed out at once above the rate:
	// Step..MaxValue, 0 means the larger of Rate and 2 × Step.
	Burst int64 `json:"burst"`
	// MaxJump, when not 0, blocks the tag instead of jumping further than
	// this after a loss, until an operator restores it above a value its
	// records hold (fail closed rather than skip).
	MaxJump int64 `json:"max_jump"`
}

func (o TagOptions) withDefaults() (TagOptions, error) {
	if o.Start == 0 {
		o.Start = 1
	}
	if o.Step == 0 {
		o.Step = DefaultStep
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst == 0 {
		o.Burst = max(o.Rate, 2*o.Step)
	}
	var errs []error
	check := func(name string, v, lo, hi int64) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%w: %s %d: valid range is %d..%d", ErrInvalidOptions, name, v, lo, hi))
		}
	}
	check("start", o.Start, 1, MaxValue)
	check("step", o.Step, 1, MaxStep)
	check("rate", o.Rate, 1, MaxValue)
	check("burst", o.Burst, o.Step, MaxValue)
	check("max jump", o.MaxJump, 0, MaxValue)
	if o.Max != 0 {
		check("max", o.Max, o.Start, MaxValue)
	}
	return o, errors.Join(errs...)
}
