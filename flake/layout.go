package flake

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of the layout. They equal sonyflake v2's, so sonyflake's
// Decompose reads IDs made with the default layout.
const (
	DefaultBitsSequence  = 8
	DefaultBitsMachineID = 16
	DefaultTimeUnit      = 10 * time.Millisecond
	MinBitsTime          = 32
	MaxBitsPart          = 30
	MinTimeUnit          = time.Millisecond
)

// DefaultStartTime is the epoch of the default layout: 2025-01-01T00:00:00Z.
var DefaultStartTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Errors of the layout. Each returned error wraps one of these and says what
// the valid range is, so callers test with errors.Is and users read the text.
var (
	ErrInvalidBitsSequence  = errors.New("invalid bit length for sequence")
	ErrInvalidBitsMachineID = errors.New("invalid bit length for machine ID")
	ErrInvalidBitsTime      = errors.New("invalid bit length for time")
	ErrInvalidTimeUnit      = errors.New("invalid time unit")
	ErrStartTimeAhead       = errors.New("start time is ahead of now")
	ErrInvalidMachineID     = errors.New("invalid machine ID")
	ErrInvalidSequence      = errors.New("invalid sequence")
	ErrInvalidTick          = errors.New("invalid tick")
	ErrInvalidLayout        = errors.New("invalid layout")
)

// Layout is the shape of an ID: | time | sequence | machine ID |, with the
// time counted in ticks of TimeUnit since StartTime. It is a small value;
// build one with NewLayout (or Settings.Layout) so it is validated.
type Layout struct {
	BitsTime      int
	BitsSequence  int
	BitsMachineID int
	TimeUnit      time.Duration
	StartTime     time.Time
}

// NewLayout validates a layout, filling zero values with the defaults
// (8 sequence bits, 16 machine bits, 10 ms ticks, 2025-01-01 UTC).
func NewLayout(bitsSequence, bitsMachineID int, unit time.Duration, start time.Time) (Layout, error) {
	if bitsSequence == 0 {
		bitsSequence = DefaultBitsSequence
	}
	if bitsMachineID == 0 {
		bitsMachineID = DefaultBitsMachineID
	}
	if unit == 0 {
		unit = DefaultTimeUnit
	}
	if start.IsZero() {
		start = DefaultStartTime
	}
	if bitsSequence < 1 || bitsSequence > MaxBitsPart {
		return Layout{}, fmt.Errorf("%w: %d, valid range is 1..%d (0 means %d)",
			ErrInvalidBitsSequence, bitsSequence, MaxBitsPart, DefaultBitsSequence)
	}
	if bitsMachineID < 1 || bitsMachineID > MaxBitsPart {
		return Layout{}, fmt.Errorf("%w: %d, valid range is 1..%d (0 means %d)",
			ErrInvalidBitsMachineID, bitsMachineID, MaxBitsPart, DefaultBitsMachineID)
	}
	bitsTime := 63 - bitsSequence - bitsMachineID
	if bitsTime < MinBitsTime {
		return Layout{}, fmt.Errorf("%w: 63 - %d sequence - %d machine = %d, must be >= %d (sequence + machine bits <= %d)",
			ErrInvalidBitsTime, bitsSequence, bitsMachineID, bitsTime, MinBitsTime, 63-MinBitsTime)
	}
	if unit < MinTimeUnit {
		return Layout{}, fmt.Errorf("%w: %v, must be >= %v", ErrInvalidTimeUnit, unit, MinTimeUnit)
	}
	return Layout{
		BitsTime:      bitsTime,
		BitsSequence:  bitsSequence,
		BitsMachineID: bitsMachineID,
		TimeUnit:      unit,
		StartTime:     start.UTC(),
	}, nil
}

// DefaultLayout is the layout of the zero Settings.
func DefaultLayout() Layout {
	l, _ := NewLayout(0, 0, 0, time.Time{})
	return l
}

// MaxTick is the last tick the time bits can hold.
func (l Layout) MaxTick() int64 { return 1<<l.BitsTime - 1 }

// MaxSequence is the largest sequence number.
func (l Layout) MaxSequence() int { return 1<<l.BitsSequence - 1 }

// CounterMachineID is the machine ID reserved for counter mode
// (2^BitsMachineID - 1). It is never leased to a time-based generator.
func (l Layout) CounterMachineID() int { return 1<<l.BitsMachineID - 1 }

// MaxMachineID is the largest machine ID a time-based generator may use.
func (l Layout) MaxMachineID() int { return l.CounterMachineID() - 1 }

// IDsPerTick is how many IDs one machine ID can issue in one tick.
func (l Layout) IDsPerTick() int64 { return 1 << l.BitsSequence }

// Tick returns the tick that contains t (negative before the epoch).
func (l Layout) Tick(t time.Time) int64 {
	d := t.Sub(l.StartTime)
	tick := int64(d / l.TimeUnit)
	if d < 0 && d%l.TimeUnit != 0 {
		tick--
	}
	return tick
}

// TickTime returns the start of a tick.
func (l Layout) TickTime(tick int64) time.Time {
	return l.StartTime.Add(time.Duration(tick) * l.TimeUnit)
}

// Compose builds an ID from its parts, checking each against the layout.
func (l Layout) Compose(tick int64, sequence, machineID int) (uint64, error) {
	if tick < 0 || tick > l.MaxTick() {
		return 0, fmt.Errorf("%w: %d, valid range is 0..%d", ErrInvalidTick, tick, l.MaxTick())
	}
	if sequence < 0 || sequence > l.MaxSequence() {
		return 0, fmt.Errorf("%w: %d, valid range is 0..%d", ErrInvalidSequence, sequence, l.MaxSequence())
	}
	if machineID < 0 || machineID > l.CounterMachineID() {
		return 0, fmt.Errorf("%w: %d, valid range is 0..%d", ErrInvalidMachineID, machineID, l.CounterMachineID())
	}
	return l.compose(tick, sequence, machineID), nil
}

func (l Layout) compose(tick int64, sequence, machineID int) uint64 {
	return uint64(tick)<<(l.BitsSequence+l.BitsMachineID) |
		uint64(sequence)<<l.BitsMachineID |
		uint64(machineID)
}

// Parts are the fields of an ID.
type Parts struct {
	ID        uint64
	Time      time.Time // start of the tick, UTC
	Tick      int64
	Sequence  int
	MachineID int
}

// Decompose splits an ID into its parts. Bit 63 is ignored.
func (l Layout) Decompose(id uint64) Parts {
	id &= 1<<63 - 1
	tick := int64(id >> (l.BitsSequence + l.BitsMachineID))
	return Parts{
		ID:        id,
		Time:      l.TickTime(tick),
		Tick:      tick,
		Sequence:  int(id>>l.BitsMachineID) & l.MaxSequence(),
		MachineID: int(id & (1<<l.BitsMachineID - 1)),
	}
}

// ToTime returns the start of the tick an ID was issued in.
func (l Layout) ToTime(id uint64) time.Time { return l.Decompose(id).Time }

// String is the canonical form of a layout, stored fleet-wide in Redis:
// "time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z".
func (l Layout) String() string {
	return fmt.Sprintf("time=%d,seq=%d,machine=%d,tick=%s,epoch=%s",
		l.BitsTime, l.BitsSequence, l.BitsMachineID, l.TimeUnit, l.StartTime.UTC().Format(time.RFC3339Nano))
}

// Equal reports whether two layouts produce the same IDs.
func (l Layout) Equal(o Layout) bool {
	return l.BitsSequence == o.BitsSequence && l.BitsMachineID == o.BitsMachineID &&
		l.TimeUnit == o.TimeUnit && l.StartTime.Equal(o.StartTime)
}

// ParseLayout reads the canonical form written by String.
func ParseLayout(s string) (Layout, error) {
	var seq, machine int
	var unit time.Duration
	var start time.Time
	seen := map[string]bool{}
	for _, field := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(field, "=")
		if !ok || seen[k] {
			return Layout{}, fmt.Errorf("%w: %q: want time=..,seq=..,machine=..,tick=..,epoch=..", ErrInvalidLayout, s)
		}
		seen[k] = true
		var err error
		switch k {
		case "time":
			_, err = strconv.Atoi(v) // derived; checked below
		case "seq":
			seq, err = strconv.Atoi(v)
		case "machine":
			machine, err = strconv.Atoi(v)
		case "tick":
			unit, err = time.ParseDuration(v)
		case "epoch":
			start, err = time.Parse(time.RFC3339Nano, v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return Layout{}, fmt.Errorf("%w: %q: %v", ErrInvalidLayout, s, err)
		}
	}
	if len(seen) != 5 || seq == 0 || machine == 0 || unit == 0 || start.IsZero() {
		return Layout{}, fmt.Errorf("%w: %q: want time=..,seq=..,machine=..,tick=..,epoch=..", ErrInvalidLayout, s)
	}
	l, err := NewLayout(seq, machine, unit, start)
	if err != nil {
		return Layout{}, fmt.Errorf("%w: %q: %w", ErrInvalidLayout, s, err)
	}
	if l.String() != s {
		return Layout{}, fmt.Errorf("%w: %q is not canonical (want %q)", ErrInvalidLayout, s, l.String())
	}
	return l, nil
}
