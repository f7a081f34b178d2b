package sim

import (
	"container/heap"
	"context"
	"time"

	"github.com/flaked/flaked/flake"
)

// world is virtual time and the events due on it. Everything in a run
// happens on the one goroutine that calls runUntil: timers of the code
// under test (lease renewals, health checks, generator ticks, prefetches)
// are events here, and a Sleep of that code moves time on at once. So a
// run is a function of its seed.
//
// A Sleep moves time without running the events that fall due meanwhile:
// they run late, when the sleeper returns. To the rest of the fleet that
// looks like a pause of every other process for as long as the sleep,
// a schedule that can happen in production (only not every one that can).
type world struct {
	epoch    time.Time     // wall time at virtual time 0
	now      time.Duration // virtual time since epoch
	seq      uint64
	events   eventHeap
	deadline time.Duration // of the operation in progress (0: none)
	limit    time.Duration // virtual time past which the run is a runaway
	halted   bool          // a failure was found: run nothing more
}

// halt stops the run after the event in progress.
func (w *world) halt() { w.halted = true }

type event struct {
	due     time.Duration
	seq     uint64
	f       func()
	owner   *proc // nil for the world's own events
	stopped bool
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// at schedules f at virtual time due for owner.
func (w *world) at(due time.Duration, owner *proc, f func()) *event {
	w.seq++
	e := &event{due: max(due, w.now), seq: w.seq, f: f, owner: owner}
	heap.Push(&w.events, e)
	return e
}

// runUntil runs every event due by t, in order, then sets the time to t
// (or later, if an event slept past it). Events of a dead process are
// dropped; those of a paused one wait for it to resume.
func (w *world) runUntil(t time.Duration) {
	for !w.halted && len(w.events) > 0 && w.events[0].due <= t {
		e := heap.Pop(&w.events).(*event)
		if e.stopped {
			continue
		}
		if p := e.owner; p != nil {
			if p.dead {
				continue
			}
			if p.pausedUntil > e.due {
				// A moment after the pause: a request that arrives as the
				// process resumes may come first.
				e.due = p.pausedUntil + time.Millisecond
				heap.Push(&w.events, e)
				continue
			}
		}
		w.now = max(w.now, e.due)
		if w.now > w.limit {
			panic("sim: runaway: virtual time passed the run's limit")
		}
		e.stopped = true
		e.f()
	}
	w.now = max(w.now, t)
}

// sleep lets d pass for the caller, bounded by the deadline of the
// operation in progress.
func (w *world) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.deadline > 0 && w.now+d > w.deadline {
		w.now = max(w.now, w.deadline)
		return context.DeadlineExceeded
	}
	w.now += max(d, 0)
	if w.now > w.limit {
		panic("sim: runaway: virtual time passed the run's limit")
	}
	return nil
}

// procClock is one process's clock: a wall clock that can be skewed and
// stepped, a monotonic one that cannot, timers that are world events.
type procClock struct {
	w     *world
	p     *proc
	wall  time.Duration // wall-clock offset from virtual time
	slack time.Duration // timers shorter than this fire this late (timer slack)
}

var _ flake.Stepped = (*procClock)(nil)

func (c *procClock) Now() time.Time           { return c.w.epoch.Add(c.w.now + c.wall) }
func (c *procClock) Monotonic() time.Duration { return c.w.now }

// AfterFunc schedules f on the world. Timers shorter than the slack fire
// after the slack, as a busy kernel's would: the generator's timer at
// every tick would otherwise be most of a run's events.
func (c *procClock) AfterFunc(d time.Duration, f func()) flake.Timer {
	if d > 0 && d < c.slack {
		d = c.slack
	}
	return timer{c.w.at(c.w.now+d, c.p, f)}
}

func (c *procClock) Sleep(ctx context.Context, d time.Duration) error { return c.w.sleep(ctx, d) }

type timer struct{ e *event }

func (t timer) Stop() bool {
	was := !t.e.stopped
	t.e.stopped = true
	return was
}
