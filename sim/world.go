package sim

import (
	"container/heap"
	"context"
	"slices"
	"time"

	"github.com/flaked/flaked/clock"
)

// world is virtual time and the events due on it. Everything in a run
// happens on the one goroutine that calls runUntil: timers of the code
// under test (lease renewals, health checks, generator ticks, prefetches)
// are events here, and a Sleep of that code moves time on at once. So a
// run is a function of its seed.
//
// While a process sleeps, the timers of the other processes that fall due
// run (their renewals, health checks, prefetches), as they would on their
// own machines, and so do the deployment's own timers (replication, the
// Sentinels: world.atMid). The sleeper's own events wait until it returns
// (its locks are held), and so do the world's others: faults, which could
// kill the sleeper mid-call, and the workload, which has one caller.
type world struct {
	epoch    time.Time     // wall time at virtual time 0
	now      time.Duration // virtual time since epoch
	seq      uint64
	events   eventHeap
	deadline time.Duration // of the operation in progress (0: none)
	limit    time.Duration // virtual time past which the run is a runaway
	halted   bool          // a failure was found: run nothing more
	sleeping []*proc       // processes inside a Sleep, outermost first
}

// halt stops the run after the event in progress.
func (w *world) halt() { w.halted = true }

type event struct {
	due     time.Duration
	seq     uint64
	f       func()
	owner   *proc // nil for the world's own events
	stopped bool
	// mid: a world event that runs while a process waits on a call (the
	// deployment's own timers: replication, Sentinels), not held for it.
	mid bool
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

// atMid schedules f at due as a world event that also runs while a
// process waits on a call (event.mid).
func (w *world) atMid(due time.Duration, f func()) *event {
	e := w.at(due, nil, f)
	e.mid = true
	return e
}

// runUntil runs every event due by t, in order, then sets the time to t
// (or later, if an event slept past it). Events of a dead process are
// dropped; those of a paused one wait for it to resume.
func (w *world) runUntil(t time.Duration) {
	for !w.halted && len(w.events) > 0 && w.events[0].due <= t {
		w.runEvent(heap.Pop(&w.events).(*event))
	}
	w.now = max(w.now, t)
}

// runEvent runs e, popped from the heap, unless it was stopped, its
// process is dead, or its process is paused (then it goes back, due as the
// pause ends).
func (w *world) runEvent(e *event) {
	if e.stopped {
		return
	}
	if p := e.owner; p != nil {
		if p.dead {
			return
		}
		if p.pausedUntil > e.due {
			// A moment after the pause: a request that arrives as the
			// process resumes may come first.
			e.due = p.pausedUntil + time.Millisecond
			heap.Push(&w.events, e)
			return
		}
	}
	w.now = max(w.now, e.due)
	if w.now > w.limit {
		panic("sim: runaway: virtual time passed the run's limit")
	}
	e.stopped = true
	e.f()
}

// sleep lets d pass for p, bounded by the deadline of the operation in
// progress, and runs the other processes' events due meanwhile.
func (w *world) sleep(ctx context.Context, p *proc, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	until := w.now + max(d, 0)
	var err error
	if w.deadline > 0 && until > w.deadline {
		until, err = max(w.now, w.deadline), context.DeadlineExceeded
	}
	if until > w.limit {
		panic("sim: runaway: virtual time passed the run's limit")
	}
	w.runOthers(p, until)
	w.now = max(w.now, until)
	return err
}

// pass lets d pass for p, whatever its deadline (a request on the wire),
// while the other processes run.
func (w *world) pass(p *proc, d time.Duration) {
	until := w.now + d
	w.runOthers(p, until)
	w.now = max(w.now, until)
}

// runOthers runs the events due by t of processes other than p and the
// processes already sleeping; the rest wait for the sleepers.
func (w *world) runOthers(p *proc, t time.Duration) {
	deadline := w.deadline // the sleeper's; the others' events have their own
	w.deadline = 0
	w.sleeping = append(w.sleeping, p)
	var held []*event
	for !w.halted && len(w.events) > 0 && w.events[0].due <= t {
		e := heap.Pop(&w.events).(*event)
		if e.owner == nil && !e.mid || e.owner != nil && slices.Contains(w.sleeping, e.owner) {
			held = append(held, e)
			continue
		}
		w.runEvent(e)
	}
	for _, e := range held {
		heap.Push(&w.events, e)
	}
	w.sleeping = w.sleeping[:len(w.sleeping)-1]
	w.deadline = deadline
}

// procClock is one process's clock: a wall clock that can be skewed and
// stepped, a monotonic one that cannot, timers that are world events.
type procClock struct {
	w     *world
	p     *proc
	wall  time.Duration // wall-clock offset from virtual time
	slack time.Duration // timers shorter than this fire this late (timer slack)
}

var _ clock.Stepped = (*procClock)(nil)

func (c *procClock) Now() time.Time           { return c.w.epoch.Add(c.w.now + c.wall) }
func (c *procClock) Monotonic() time.Duration { return c.w.now }

// AfterFunc schedules f on the world. Timers shorter than the slack fire
// after the slack, as a busy kernel's would: the generator's timer at
// every tick would otherwise be most of a run's events.
func (c *procClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if d > 0 && d < c.slack {
		d = c.slack
	}
	return timer{c.w.at(c.w.now+d, c.p, f)}
}

func (c *procClock) Sleep(ctx context.Context, d time.Duration) error { return c.w.sleep(ctx, c.p, d) }

type timer struct{ e *event }

func (t timer) Stop() bool {
	was := !t.e.stopped
	t.e.stopped = true
	return was
}
