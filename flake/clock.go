package flake

import "time"

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
