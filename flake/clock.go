package flake

import (
	"sync/atomic"
	"time"
)

// Clock is where a generator gets time. The wall clock (Now) is read once, at
// New, to place the generator on the epoch; after that only Monotonic is
// read, so stepping the wall clock while running moves nothing.
// Tests inject a fake (see package flaketest) to drive time without sleeping.
type Clock interface {
	// Now returns the wall-clock time.
	Now() time.Time
	// Monotonic returns a reading of a clock that never goes backwards.
	// Only differences between readings matter.
	Monotonic() time.Duration
	// AfterFunc calls f in its own goroutine after d, like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is what AfterFunc returns.
type Timer interface {
	// Stop prevents the call if it has not happened yet.
	Stop() bool
}

// SystemClock returns the process's clock: time.Now for the wall clock and
// Go's monotonic clock reading for Monotonic.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (systemClock) Now() time.Time                            { return time.Now() }
func (c systemClock) Monotonic() time.Duration                { return time.Since(c.origin) }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// OffsetClock is the system clock shifted by an offset that can be changed
// while running: a fault-injection tool (the daemon's test-only clock
// offset setting, tests of clock rollback), never a production setting.
// Set moves both readings at once, so a negative change makes Monotonic go
// backwards, which a generator tolerates (its tick never decreases) but a
// real monotonic clock never does.
type OffsetClock struct {
	origin time.Time
	offset atomic.Int64
}

// NewOffsetClock returns the system clock shifted by offset.
func NewOffsetClock(offset time.Duration) *OffsetClock {
	c := &OffsetClock{origin: time.Now()}
	c.offset.Store(int64(offset))
	return c
}

// Set changes the offset.
func (c *OffsetClock) Set(offset time.Duration) { c.offset.Store(int64(offset)) }

// Offset returns the offset.
func (c *OffsetClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Now returns the shifted wall clock.
func (c *OffsetClock) Now() time.Time { return time.Now().Add(c.Offset()) }

// Monotonic returns the shifted monotonic reading.
func (c *OffsetClock) Monotonic() time.Duration { return time.Since(c.origin) + c.Offset() }

// AfterFunc is time.AfterFunc.
func (c *OffsetClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
