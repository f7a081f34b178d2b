package flake

import (
	"math"
	"math/big"
	"time"
)

// What a layout can do, in the units people plan with. `flaked plan` and
// the daemon's start-up warnings print these, so every figure has one
// formula, here, and the tests hold it against a running Generator.

// IDsPerSecond is the most IDs one machine ID issues per second: a full
// sequence every tick.
func (l Layout) IDsPerSecond() float64 {
	return float64(l.IDsPerTick()) / l.TimeUnit.Seconds()
}

// FleetIDsPerSecond is the most IDs one region's fleet issues per second
// in flake mode: every leasable machine ID at its full rate.
func (l Layout) FleetIDsPerSecond() float64 {
	return l.IDsPerSecond() * float64(l.LeasableMachineIDs())
}

// CounterIDsPerSecond is what counter mode can issue per second, for all
// the nodes of a region in counter mode together: they share one counter
// (fallback, counter.lua) whose values are (tick, sequence) pairs under
// the region's counter machine ID, never more than the counter's lead
// ahead of Redis TIME. So its sustained rate is one machine ID's.
func (l Layout) CounterIDsPerSecond() float64 { return l.IDsPerSecond() }

// MachineIDsFor is how many machine IDs (a node's --machine-ids) it takes
// to issue rate IDs per second; 0 for a rate <= 0.
func (l Layout) MachineIDsFor(rate float64) int {
	if rate <= 0 {
		return 0
	}
	return int(math.Ceil(rate / l.IDsPerSecond()))
}

// End is when the time bits run out: the start of tick MaxTick+1, the
// first moment at which a generator of this layout has no tick to issue
// (it fails with ErrOverTimeLimit; IDs never wrap). It equals
// TickTime(MaxTick+1) where that does not overflow a time.Duration.
func (l Layout) End() time.Time { return l.farTickTime(l.MaxTick() + 1) }

// SafeIntegerEnd is when IDs pass 2^53-1, JavaScript's largest exact
// integer: the start of the first tick whose smallest ID is 2^53. ok is
// false when no ID of the layout ever does (BitsID <= 53).
func (l Layout) SafeIntegerEnd() (t time.Time, ok bool) {
	shift := SafeIntegerBits - l.BitsSequence - l.BitsMachineID
	if shift >= l.BitsTime {
		return time.Time{}, false
	}
	return l.farTickTime(1 << shift), true
}

// SafeIntegerTick is the first tick whose IDs are 2^53 or more; ok is false
// when there is none.
func (l Layout) SafeIntegerTick() (tick int64, ok bool) {
	shift := SafeIntegerBits - l.BitsSequence - l.BitsMachineID
	if shift >= l.BitsTime {
		return 0, false
	}
	return 1 << shift, true
}

// farTickTime is TickTime for ticks far enough out that tick * TimeUnit
// overflows a time.Duration (292 years): the product is taken exactly.
// Beyond what a time.Time's seconds hold, it returns the latest one.
func (l Layout) farTickTime(tick int64) time.Time {
	ns := new(big.Int).Mul(big.NewInt(tick), big.NewInt(int64(l.TimeUnit)))
	sec, rem := new(big.Int).QuoRem(ns, big.NewInt(int64(time.Second)), new(big.Int))
	sec.Add(sec, big.NewInt(l.StartTime.Unix()))
	if !sec.IsInt64() || sec.Int64() > maxUnix {
		return time.Unix(maxUnix, 0).UTC()
	}
	return time.Unix(sec.Int64(), int64(l.StartTime.Nanosecond())+rem.Int64()).UTC()
}

// maxUnix is the latest second farTickTime returns: year 292277026596
// would overflow time.Time's own arithmetic; this is well short of it.
const maxUnix = 1 << 62
