// Package clocktest has a clock that tests drive by hand (a clock.Clock),
// with the wall clock and the monotonic clock moved apart so wall-clock
// steps can be simulated.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/flaked/flaked/clock"
)

// Clock is a fake clock.Clock. Advance moves both clocks and runs every
// AfterFunc that falls due, in order, in the caller's goroutine (so when
// Advance returns, the generator has seen the new time). StepWall moves the
// wall clock only, as an NTP step or an operator's `date -s` would.
type Clock struct {
	mu     sync.Mutex
	wall   time.Time
	mono   time.Duration
	seq    int
	timers []*timer
}

type timer struct {
	c       *Clock
	due     time.Duration
	seq     int
	f       func()
	stopped bool
}

// New returns a fake clock whose wall clock reads start.
func New(start time.Time) *Clock { return &Clock{wall: start} }

var _ clock.Clock = (*Clock)(nil)

// Now returns the fake wall-clock time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Monotonic returns the fake monotonic reading.
func (c *Clock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// AfterFunc schedules f for when the fake clock has advanced by d.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, due: c.mono + max(d, 0), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves both clocks forward by d, firing due timers in order.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.mono + d
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.timers, func(i, j int) bool {
			if c.timers[i].due != c.timers[j].due {
				return c.timers[i].due < c.timers[j].due
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		var next *timer
		for len(c.timers) > 0 && c.timers[0].stopped {
			c.timers = c.timers[1:]
		}
		if len(c.timers) > 0 && c.timers[0].due <= target {
			next = c.timers[0]
			c.timers = c.timers[1:]
			next.stopped = true
			c.wall = c.wall.Add(next.due - c.mono)
			c.mono = max(c.mono, next.due)
		} else {
			c.wall = c.wall.Add(target - c.mono)
			c.mono = target
		}
		c.mu.Unlock()
		if next == nil {
			return
		}
		next.f()
	}
}

// StepWall moves the wall clock only (d may be negative).
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}
