// Package clock is where flaked reads time and runs its background work:
// the Clock a generator, a lease, a counter or a sequence is given (the
// system's, one shifted for fault tests, a test's or the simulator's), and
// the tasks, tickers and sleeps that run on it, so that a simulator (package
// sim) can run a whole node on virtual time and replay a run from its seed.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock is where flaked gets time. A generator (package flake) reads the
// wall clock (Now) once, at its start, to place itself on the epoch; after
// that only Monotonic, so stepping the wall clock while running moves
// nothing. Tests inject a fake (see package clocktest) to drive time
// without sleeping.
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

// System returns the process's clock: time.Now for the wall clock and
// Go's monotonic clock reading for Monotonic.
func System() Clock { return system{origin: time.Now()} }

type system struct{ origin time.Time }

func (system) Now() time.Time                            { return time.Now() }
func (c system) Monotonic() time.Duration                { return time.Since(c.origin) }
func (system) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Offset is the system clock shifted by an offset that can be changed
// while running: a fault-injection tool (the daemon's test-only clock
// offset setting, tests of clock rollback), never a production setting.
// Set moves both readings at once, so a negative change makes Monotonic go
// backwards, which a generator tolerates (its tick never decreases) but a
// real monotonic clock never does.
type Offset struct {
	origin time.Time
	offset atomic.Int64
}

// NewOffset returns the system clock shifted by offset.
func NewOffset(offset time.Duration) *Offset {
	c := &Offset{origin: time.Now()}
	c.offset.Store(int64(offset))
	return c
}

// Set changes the offset.
func (c *Offset) Set(offset time.Duration) { c.offset.Store(int64(offset)) }

// Now returns the shifted wall clock.
func (c *Offset) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Monotonic returns the shifted monotonic reading.
func (c *Offset) Monotonic() time.Duration {
	return time.Since(c.origin) + time.Duration(c.offset.Load())
}

// AfterFunc is time.AfterFunc.
func (c *Offset) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// FiresTimers reports whether c runs its timers by itself: the system
// clock and Offset do; a Stepped clock runs a waited-for task in the
// waiter (Task.Wait), and a hand-driven test clock only when told to.
func FiresTimers(c Clock) bool {
	switch c.(type) {
	case system, *Offset:
		return true
	}
	return false
}
