package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Background work runs on a Clock, never on the runtime's timers or bare
// goroutines, so that a simulator (package sim) can run the whole node on
// virtual time, one step at a time, and replay a run from its seed. With
// the system clock these helpers are a goroutine, a timer and a ticker.

// Stepped is a Clock on which time moves only when the program asks it
// to, as a simulator's does: Sleep advances it instead of blocking, and
// work started with Go runs when the simulator gets to it, unless whoever
// waits for it runs it first (Task.Wait). Production code never needs
// one; it only must not block on a channel that only a timer can close.
type Stepped interface {
	Clock
	// Sleep lets d pass on the clock, or returns ctx.Err() if ctx ends
	// first.
	Sleep(ctx context.Context, d time.Duration) error
}

// Sleep waits d on c, or until ctx ends: then it returns ctx.Err().
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if s, ok := c.(Stepped); ok {
		return s.Sleep(ctx, d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// Task is work started in the background with Go.
type Task struct {
	clock Clock
	timer Timer
	f     func()
	state atomic.Int32 // taskPending, taskStarted or taskStopped
	done  chan struct{}
}

const (
	taskPending int32 = iota
	taskStarted
	taskStopped
)

// Go starts f in the background on c: at once, in a goroutine of its own,
// with the system clock; as the simulator's next event with a Stepped one.
func Go(c Clock, f func()) *Task {
	t := &Task{clock: c, f: f, done: make(chan struct{})}
	t.timer = c.AfterFunc(0, t.run)
	return t
}

func (t *Task) run() {
	if t.state.CompareAndSwap(taskPending, taskStarted) {
		t.f()
		close(t.done)
	}
}

// RunPending runs the task now, in the caller's goroutine, if it has not
// started: for a caller whose clock runs no timer while it waits
// (FiresTimers false).
func (t *Task) RunPending() {
	if t.state.Load() == taskPending {
		t.timer.Stop()
		t.run()
	}
}

// Done is closed when the task has run, or was stopped before it started.
func (t *Task) Done() <-chan struct{} { return t.done }

// Wait waits until the task has run, or ctx ends. On a Stepped clock a
// task that has not started runs now, in the caller's goroutine: nothing
// else would run it while the caller waits.
func (t *Task) Wait(ctx context.Context) error {
	if _, ok := t.clock.(Stepped); ok {
		t.RunPending()
	}
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop keeps the task from starting and reports true, or waits for it to
// finish and reports false when it had started.
func (t *Task) Stop() bool {
	if t.state.CompareAndSwap(taskPending, taskStopped) {
		t.timer.Stop()
		close(t.done)
		return true
	}
	<-t.done
	return false
}

// Ticker calls f every period on a Clock until Stop. The next call is
// scheduled when f returns, so calls never overlap.
type Ticker struct {
	clock  Clock
	period time.Duration
	f      func()

	mu      sync.Mutex
	timer   Timer
	stopped bool
}

// Every starts a Ticker: f is first called after period.
func Every(c Clock, period time.Duration, f func()) *Ticker {
	t := &Ticker{clock: c, period: period, f: f}
	t.mu.Lock()
	t.timer = c.AfterFunc(period, t.fire)
	t.mu.Unlock()
	return t
}

func (t *Ticker) fire() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.timer = nil // running: Kick does not start a second call
	t.mu.Unlock()
	t.f()
	t.mu.Lock()
	if !t.stopped {
		t.timer = t.clock.AfterFunc(t.period, t.fire)
	}
	t.mu.Unlock()
}

// Kick calls f as soon as possible instead of at the end of the period;
// when f is running, it changes nothing.
func (t *Ticker) Kick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.timer == nil || !t.timer.Stop() {
		return
	}
	t.timer = t.clock.AfterFunc(0, t.fire)
}

// Stop ends the calls; one that is running finishes, none starts after.
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.timer != nil {
		t.timer.Stop()
	}
}
