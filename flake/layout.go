package flake

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flaked/flaked/internal/bugs"
)

// Defaults of the layout. They equal sonyflake v2's, so sonyflake's
// Decompose reads IDs made with the default layout.
const (
	DefaultBitsID        = 63
	DefaultBitsSequence  = 8
	DefaultBitsMachineID = 16
	DefaultTimeUnit      = 10 * time.Millisecond
	MinBitsTime          = 32
	MaxBitsPart          = 30
	MinTimeUnit          = time.Millisecond
	// MinBitsID is the narrowest ID: every ID of a layout this narrow is
	// below 2^53, so JavaScript's numbers (IEEE doubles) hold it exactly.
	MinBitsID = 53
	// MaxBitsID is the widest ID: it fits an int64 as well as a uint64.
	MaxBitsID = 63
	// SafeIntegerBits is the width of the integers a double holds exactly:
	// IDs from 2^53 up are rounded by JavaScript (Number.MAX_SAFE_INTEGER).
	SafeIntegerBits = 53
)

// DefaultStartTime is the epoch of the default layout: 2025-01-01T00:00:00Z.
var DefaultStartTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Errors of the layout. Each returned error wraps one of these and says what
// the valid range is, so callers test with errors.Is and users read the text.
var (
	ErrInvalidBitsID        = errors.New("invalid bit length for the ID")
	ErrInvalidBitsSequence  = errors.New("invalid bit length for sequence")
	ErrInvalidBitsMachineID = errors.New("invalid bit length for machine ID")
	ErrInvalidBitsTime      = errors.New("invalid bit length for time")
	ErrInvalidBitsRegion    = errors.New("invalid bit length for region")
	ErrInvalidRegion        = errors.New("invalid region")
	ErrInvalidTimeUnit      = errors.New("invalid time unit")
	ErrStartTimeAhead       = errors.New("start time is ahead of now")
	ErrInvalidMachineID     = errors.New("invalid machine ID")
	ErrInvalidSequence      = errors.New("invalid sequence")
	ErrInvalidTick          = errors.New("invalid tick")
	ErrInvalidLayout        = errors.New("invalid layout")
)

// Layout is the shape of an ID: | time | sequence | machine ID |, with the
// time counted in ticks of TimeUnit since StartTime, in BitsID() bits. The
// top BitsRegion bits of the machine ID name a region (a fleet with a
// Redis of its own); Region is the one this layout's generators run in, so
// they use only its machine IDs. It is a small value; build one with
// NewLayout or Settings.Layout so it is validated.
type Layout struct {
	BitsTime      int
	BitsSequence  int
	BitsMachineID int
	TimeUnit      time.Duration
	StartTime     time.Time
	BitsRegion    int // 0: no regions
	Region        int
}

// NewLayout validates a 63-bit layout without regions, filling zero values
// with the defaults (8 sequence bits, 16 machine bits, 10 ms ticks,
// 2025-01-01 UTC). Settings.Layout builds any layout.
func NewLayout(bitsSequence, bitsMachineID int, unit time.Duration, start time.Time) (Layout, error) {
	return Settings{BitsSequence: bitsSequence, BitsMachineID: bitsMachineID, TimeUnit: unit, StartTime: start}.Layout()
}

// Layout returns the validated layout of the settings.
func (s Settings) Layout() (Layout, error) {
	bitsID, seq, mach := cmp.Or(s.BitsID, DefaultBitsID), cmp.Or(s.BitsSequence, DefaultBitsSequence), cmp.Or(s.BitsMachineID, DefaultBitsMachineID)
	unit, start := cmp.Or(s.TimeUnit, DefaultTimeUnit), s.StartTime
	if start.IsZero() {
		start = DefaultStartTime
	}
	if bitsID < MinBitsID || bitsID > MaxBitsID {
		return Layout{}, fmt.Errorf("%w: %d, valid range is %d..%d (0 means %d; %d keeps every ID below 2^53 for JavaScript)",
			ErrInvalidBitsID, bitsID, MinBitsID, MaxBitsID, DefaultBitsID, MinBitsID)
	}
	if seq < 1 || seq > MaxBitsPart {
		return Layout{}, fmt.Errorf("%w: %d, valid range is 1..%d (0 means %d)",
			ErrInvalidBitsSequence, seq, MaxBitsPart, DefaultBitsSequence)
	}
	if mach < 1 || mach > MaxBitsPart {
		return Layout{}, fmt.Errorf("%w: %d, valid range is 1..%d (0 means %d)",
			ErrInvalidBitsMachineID, mach, MaxBitsPart, DefaultBitsMachineID)
	}
	bitsTime := bitsID - seq - mach
	if bitsTime < MinBitsTime {
		return Layout{}, fmt.Errorf("%w: %d ID - %d sequence - %d machine = %d, must be >= %d (sequence + machine bits <= %d)",
			ErrInvalidBitsTime, bitsID, seq, mach, bitsTime, MinBitsTime, bitsID-MinBitsTime)
	}
	if unit < MinTimeUnit {
		return Layout{}, fmt.Errorf("%w: %v, must be >= %v", ErrInvalidTimeUnit, unit, MinTimeUnit)
	}
	if s.BitsRegion < 0 || s.BitsRegion >= mach {
		return Layout{}, fmt.Errorf("%w: %d, valid range is 0..%d (fewer than the %d machine bits; 0 means no regions)",
			ErrInvalidBitsRegion, s.BitsRegion, mach-1, mach)
	}
	if s.Region < 0 || s.Region >= 1<<s.BitsRegion {
		return Layout{}, fmt.Errorf("%w: %d, valid range is 0..%d (%d region bits)",
			ErrInvalidRegion, s.Region, 1<<s.BitsRegion-1, s.BitsRegion)
	}
	return Layout{BitsTime: bitsTime, BitsSequence: seq, BitsMachineID: mach, TimeUnit: unit, StartTime: start.UTC(),
		BitsRegion: s.BitsRegion, Region: s.Region}, nil
}

// Settings are the Settings of a generator with this layout (and machine
// ID 0): set the rest on them. Copying the layout field by field instead
// would lose a field added later (the ID's width, the region).
func (l Layout) Settings() Settings {
	bitsID := 0
	if l.BitsTime != 0 {
		bitsID = l.BitsTime + cmp.Or(l.BitsSequence, DefaultBitsSequence) + cmp.Or(l.BitsMachineID, DefaultBitsMachineID)
	}
	return Settings{BitsID: bitsID, BitsSequence: l.BitsSequence, BitsMachineID: l.BitsMachineID, TimeUnit: l.TimeUnit,
		StartTime: l.StartTime, BitsRegion: l.BitsRegion, Region: l.Region}
}

// Validate checks a layout built field by field (its BitsTime given, or 0
// for a 63-bit ID) and returns it as Settings.Layout would.
func (l Layout) Validate() (Layout, error) {
	v, err := l.Settings().Layout()
	if err != nil && l.BitsTime != 0 {
		return Layout{}, fmt.Errorf("time bits %d: %w", l.BitsTime, err)
	}
	return v, err
}

// DefaultLayout is the layout of the zero Settings.
func DefaultLayout() Layout {
	l, _ := Settings{}.Layout()
	return l
}

// BitsID is the width of the IDs: time + sequence + machine bits, 53..63.
func (l Layout) BitsID() int { return l.BitsTime + l.BitsSequence + l.BitsMachineID }

// MaxID is the largest ID of the layout, 2^BitsID-1.
func (l Layout) MaxID() uint64 { return 1<<l.BitsID() - 1 }

// CheckID returns an error naming the valid range when id is wider than
// the layout's IDs.
func (l Layout) CheckID(id uint64) error {
	if id > l.MaxID() {
		return fmt.Errorf("%w: %d is above the layout's %d-bit IDs: valid range is 0..%d", ErrInvalidID, id, l.BitsID(), l.MaxID())
	}
	return nil
}

// MaxTick is the last tick the time bits can hold.
func (l Layout) MaxTick() int64 { return 1<<l.BitsTime - 1 }

// MaxSequence is the largest sequence number.
func (l Layout) MaxSequence() int { return 1<<l.BitsSequence - 1 }

// bitsLocal are the machine bits below the region: a region's own IDs.
func (l Layout) bitsLocal() int { return l.BitsMachineID - l.BitsRegion }

// Regions is how many regions the layout has room for (1 without regions).
func (l Layout) Regions() int { return 1 << l.BitsRegion }

// RegionOf is the region a machine ID belongs to (0 without regions).
func (l Layout) RegionOf(machineID int) int { return machineID >> l.bitsLocal() }

// MachineIDsPerRegion is how many machine IDs each region has, its counter
// machine ID included (2^BitsMachineID without regions).
func (l Layout) MachineIDsPerRegion() int { return 1 << l.bitsLocal() }

// MinMachineID is the first machine ID of the layout's region (0 without
// regions).
func (l Layout) MinMachineID() int { return l.Region << l.bitsLocal() }

// CounterMachineID is the machine ID reserved for counter mode in the
// layout's region: its last one (2^BitsMachineID - 1 without regions). It
// is never leased to a time-based generator, and each region has its own,
// so the counters of two regions never issue the same ID.
func (l Layout) CounterMachineID() int {
	if bugs.CounterFleetWide {
		return 1<<l.BitsMachineID - 1
	}
	return l.MinMachineID() + l.MachineIDsPerRegion() - 1
}

// IsCounterMachineID reports whether a machine ID is the counter's of its
// region (of any region, not only the layout's).
func (l Layout) IsCounterMachineID(machineID int) bool {
	return machineID&(l.MachineIDsPerRegion()-1) == l.MachineIDsPerRegion()-1
}

// MaxMachineID is the largest machine ID a time-based generator of the
// layout's region may use; MinMachineID is the smallest.
func (l Layout) MaxMachineID() int { return l.CounterMachineID() - 1 }

// LeasableMachineIDs is how many machine IDs time-based generators of one
// region can use: the region's, less its counter machine ID.
func (l Layout) LeasableMachineIDs() int { return l.MachineIDsPerRegion() - 1 }

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
	if machineID < 0 || machineID > 1<<l.BitsMachineID-1 {
		return 0, fmt.Errorf("%w: %d, valid range is 0..%d", ErrInvalidMachineID, machineID, 1<<l.BitsMachineID-1)
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
	Region    int // the machine ID's top BitsRegion bits; 0 without regions
}

// Decompose splits an ID into its parts. Bit 63 is ignored.
func (l Layout) Decompose(id uint64) Parts {
	id &= 1<<63 - 1
	tick := int64(id >> (l.BitsSequence + l.BitsMachineID))
	mid := int(id & (1<<l.BitsMachineID - 1))
	return Parts{
		ID:        id,
		Time:      l.TickTime(tick),
		Tick:      tick,
		Sequence:  int(id>>l.BitsMachineID) & l.MaxSequence(),
		MachineID: mid,
		Region:    l.RegionOf(mid),
	}
}

// ToTime returns the start of the tick an ID was issued in.
func (l Layout) ToTime(id uint64) time.Time { return l.Decompose(id).Time }

// String is the canonical form of a layout, stored fleet-wide in Redis:
// "time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z". The
// time bits give the ID's width (time + seq + machine). A layout with
// regions appends ",region_bits=B,region=R"; one without writes neither,
// so 63-bit fleets keep the string they stored before widths and regions.
func (l Layout) String() string {
	s := fmt.Sprintf("time=%d,seq=%d,machine=%d,tick=%s,epoch=%s",
		l.BitsTime, l.BitsSequence, l.BitsMachineID, l.TimeUnit, l.StartTime.UTC().Format(time.RFC3339Nano))
	if l.BitsRegion > 0 {
		s += fmt.Sprintf(",region_bits=%d,region=%d", l.BitsRegion, l.Region)
	}
	return s
}

// Equal reports whether two layouts produce the same IDs: the same fields,
// and the same region, whose machine IDs the generators use.
func (l Layout) Equal(o Layout) bool {
	return l.BitsTime == o.BitsTime && l.BitsSequence == o.BitsSequence && l.BitsMachineID == o.BitsMachineID &&
		l.TimeUnit == o.TimeUnit && l.StartTime.Equal(o.StartTime) && l.BitsRegion == o.BitsRegion && l.Region == o.Region
}

// layoutForm is what ParseLayout's errors say it wants.
const layoutForm = "want time=..,seq=..,machine=..,tick=..,epoch=..[,region_bits=..,region=..]"

// ParseLayout reads the canonical form written by String.
func ParseLayout(s string) (Layout, error) {
	var st Settings
	var bitsTime int
	seen := map[string]bool{}
	for _, field := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(field, "=")
		if !ok || seen[k] {
			return Layout{}, fmt.Errorf("%w: %q: %s", ErrInvalidLayout, s, layoutForm)
		}
		seen[k] = true
		var err error
		switch k {
		case "time":
			bitsTime, err = strconv.Atoi(v)
		case "seq":
			st.BitsSequence, err = strconv.Atoi(v)
		case "machine":
			st.BitsMachineID, err = strconv.Atoi(v)
		case "tick":
			st.TimeUnit, err = time.ParseDuration(v)
		case "epoch":
			st.StartTime, err = time.Parse(time.RFC3339Nano, v)
		case "region_bits":
			st.BitsRegion, err = strconv.Atoi(v)
		case "region":
			st.Region, err = strconv.Atoi(v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return Layout{}, fmt.Errorf("%w: %q: %v", ErrInvalidLayout, s, err)
		}
	}
	for _, k := range []string{"time", "seq", "machine", "tick", "epoch"} {
		if !seen[k] {
			return Layout{}, fmt.Errorf("%w: %q: no %s: %s", ErrInvalidLayout, s, k, layoutForm)
		}
	}
	if st.BitsSequence == 0 || st.BitsMachineID == 0 || st.TimeUnit == 0 || st.StartTime.IsZero() || bitsTime <= 0 {
		return Layout{}, fmt.Errorf("%w: %q: %s", ErrInvalidLayout, s, layoutForm)
	}
	st.BitsID = bitsTime + st.BitsSequence + st.BitsMachineID
	l, err := st.Layout()
	if err != nil {
		return Layout{}, fmt.Errorf("%w: %q: %w", ErrInvalidLayout, s, err)
	}
	if l.String() != s {
		return Layout{}, fmt.Errorf("%w: %q is not canonical (want %q)", ErrInvalidLayout, s, l.String())
	}
	return l, nil
}
