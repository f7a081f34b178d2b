// Package segment is the prefetching buffer of values granted by Redis in
// segments, shared by counter mode (fallback) and named sequences (seq):
// the segment values are taken from, and at most one more, fetched in the
// background once the current one is used down to a point the owner sets.
//
// Invariants, which keep every value handed out once:
//   - a value is an index of a segment, taken with one atomic add (or one
//     compare-and-swap) on the segment's next index: no two takers get
//     the same index, and an index at or past the segment's end is spent;
//   - at most one fetch is in flight: callers that find the buffer spent
//     join it rather than start another, and its segment becomes current
//     only when the current one is spent (else it waits as the next);
//   - a fetch's error is handed to the callers that waited for it; a
//     caller that joined a fetch started before its call, and whose
//     context has not ended, tries again with a fetch of its own (that
//     failure may be older than the call), unless the owner says the
//     error is final.
//
// The owner keeps what the values are (Segment.Meta: the first value, the
// grant's identity) and decides sizes and when a segment is fetched; it
// guards its own state with the mutex it gives the Buffer, which calls
// its hooks with that mutex held.
package segment

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/flaked/flaked/clock"
)

// Segment is a run of n values, taken by index: index i is the owner's
// value for i (Meta holds what maps it, such as the first value).
type Segment[M any] struct {
	Meta    M
	n       int64
	next    atomic.Int64 // index of the next value to hand out
	fetchAt atomic.Int64 // taking this index starts the prefetch
}

// New returns a segment of n values whose taking of index fetchAt starts
// the prefetch (-1 or n: none does). The owner fills Meta before it hands
// the segment to a Buffer.
func New[M any](n, fetchAt int64) *Segment[M] {
	s := &Segment[M]{n: n}
	s.fetchAt.Store(fetchAt)
	return s
}

// N is how many values the segment holds.
func (s *Segment[M]) N() int64 { return s.n }

// Take reserves up to want values with one atomic add and returns the
// index of the first and how many it got: 0 when the segment was spent.
func (s *Segment[M]) Take(want int64) (i, got int64) {
	i = s.next.Add(want) - want
	if i >= s.n {
		return i, 0
	}
	return i, min(want, s.n-i)
}

// TryTake takes exactly want values or none.
func (s *Segment[M]) TryTake(want int64) (int64, bool) {
	for {
		i := s.next.Load()
		if i+want > s.n {
			return 0, false
		}
		if s.next.CompareAndSwap(i, i+want) {
			return i, true
		}
	}
}

// Triggers reports whether taking [i, i+got) took the index that starts
// the prefetch.
func (s *Segment[M]) Triggers(i, got int64) bool {
	fa := s.fetchAt.Load()
	return fa >= i && fa < i+got
}

// FetchAt is the index whose taking starts the prefetch.
func (s *Segment[M]) FetchAt() int64 { return s.fetchAt.Load() }

// SetFetchAt moves the index whose taking starts the prefetch.
func (s *Segment[M]) SetFetchAt(i int64) { s.fetchAt.Store(i) }

// Taken is the next index to hand out: how many values were taken, or
// more than N once spent (adds past the end count too).
func (s *Segment[M]) Taken() int64 { return s.next.Load() }

// Left is how many values are still to be taken.
func (s *Segment[M]) Left() int64 { return max(0, s.n-s.next.Load()) }

// Spent reports whether no value is left.
func (s *Segment[M]) Spent() bool { return s.next.Load() >= s.n }

// SkipTo makes sure no index below i is handed out from now on.
func (s *Segment[M]) SkipTo(i int64) {
	i = min(i, s.n)
	for {
		old := s.next.Load()
		if old >= i || s.next.CompareAndSwap(old, i) {
			return
		}
	}
}

// Seal closes the segment to takers and returns the index of its first
// value not taken (N when all were).
func (s *Segment[M]) Seal() int64 { return min(s.next.Swap(s.n), s.n) }

// Fetch is one fetch: run in the background on the Buffer's clock, it
// returns the segment the owner got, or why it got none.
type Fetch[M any] func() (*Segment[M], error)

// Run is a fetch in flight.
type Run struct {
	task *clock.Task
	err  error // set before the task is done
}

// Wait waits until the fetch is done or ctx ends.
func (r *Run) Wait(ctx context.Context) error { return r.task.Wait(ctx) }

// Done is closed when the fetch is done.
func (r *Run) Done() <-chan struct{} { return r.task.Done() }

// Stop cancels the fetch's task and waits for it.
func (r *Run) Stop() { r.task.Stop() }

// WaitError is Await's error when the caller's context ended while it
// waited for a fetch still in flight. Last is the error of the last fetch
// that failed, if the last one did: it says what the buffer waits for
// (grants the replicas do not acknowledge, Redis away), not only that
// time ran out.
type WaitError struct{ Err, Last error }

func (e *WaitError) Error() string { return e.Err.Error() }
func (e *WaitError) Unwrap() error { return e.Err }

// Buffer holds the segment values are taken from and the one fetched
// ahead. Its fields are set before first use; the hooks run with Mu held.
type Buffer[M any] struct {
	// Mu guards the buffer, and the owner's state its hooks read.
	Mu *sync.Mutex
	// Clock runs the fetches (clock.Go).
	Clock clock.Clock
	// ErrClosed is the owner's error for a closed buffer: Await returns it
	// when Closed says so, or when the fetch it waited for failed with it.
	ErrClosed error
	// Closed reports whether the owner is closed: no fetch starts then.
	Closed func() bool
	// Begin is called as a fetch starts and returns the fetch to run.
	Begin func() Fetch[M]
	// Landed is called when a fetch is done, before its segment is handed
	// over: it returns the error to hand to the waiters (nil hands the
	// segment over: made current when the current one is spent, else kept
	// as the next).
	Landed func(*Segment[M], error) error
	// Install, when set, is called before a segment becomes current.
	Install func(*Segment[M])
	// Final, when set, reports a fetch error that waiting does not cure:
	// a caller that joined that fetch reports it rather than try again.
	Final func(error) bool
	// Waiting, when set, is called when a caller starts waiting for a
	// fetch.
	Waiting func()

	cur  atomic.Pointer[Segment[M]]
	next *Segment[M] // fetched ahead, not yet current
	run  *Run        // the fetch in flight, if any
	last error       // of the last fetch, nil after a success
}

// Current is the segment values are taken from now.
func (b *Buffer[M]) Current() *Segment[M] { return b.cur.Load() }

// SetCurrent makes s current without the Install hook: the owner's first
// (empty) segment.
func (b *Buffer[M]) SetCurrent(s *Segment[M]) { b.cur.Store(s) }

// NextLocked is the segment fetched ahead, nil when there is none.
func (b *Buffer[M]) NextLocked() *Segment[M] { return b.next }

// DropNextLocked forgets the segment fetched ahead.
func (b *Buffer[M]) DropNextLocked() { b.next = nil }

// RunLocked is the fetch in flight, nil when there is none.
func (b *Buffer[M]) RunLocked() *Run { return b.run }

// IdleLocked reports whether nothing is fetched ahead or on its way.
func (b *Buffer[M]) IdleLocked() bool { return b.next == nil && b.run == nil }

// InstallNextLocked makes the segment fetched ahead current, if there is
// one, and reports whether there was.
func (b *Buffer[M]) InstallNextLocked() bool {
	if b.next == nil {
		return false
	}
	b.installLocked(b.next)
	b.next = nil
	return true
}

func (b *Buffer[M]) installLocked(s *Segment[M]) {
	if b.Install != nil {
		b.Install(s)
	}
	b.cur.Store(s)
}

// Prefetch starts fetching the next segment, unless one is fetched ahead
// or on its way, the owner is closed, or s is no longer current. A taker
// calls it when its take Triggers.
func (b *Buffer[M]) Prefetch(s *Segment[M]) {
	b.Mu.Lock()
	if !b.Closed() && b.IdleLocked() && b.cur.Load() == s {
		b.StartLocked()
	}
	b.Mu.Unlock()
}

// StartLocked returns the fetch in flight, starting one if none is.
func (b *Buffer[M]) StartLocked() *Run {
	if b.run != nil {
		return b.run
	}
	r := &Run{}
	b.run = r
	fetch := b.Begin()
	r.task = clock.Go(b.Clock, func() {
		seg, err := fetch()
		b.land(r, seg, err)
	})
	return r
}

// land hands a fetch's segment over, or its error to its waiters.
func (b *Buffer[M]) land(r *Run, seg *Segment[M], err error) {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	b.run = nil
	b.last = err
	if err = b.Landed(seg, err); err == nil {
		if b.cur.Load().Spent() {
			b.installLocked(seg)
		} else {
			b.next = seg
		}
	}
	r.err = err
}

// Await is the slow path, once s is spent: it makes the segment fetched
// ahead current, or waits for a fetch (starting one, or joining the one
// in flight). It returns nil when the caller should take again; ErrClosed;
// a *WaitError when ctx ended first; or the error of the fetch it waited
// for.
func (b *Buffer[M]) Await(ctx context.Context, s *Segment[M]) error {
	b.Mu.Lock()
	if b.Closed() {
		b.Mu.Unlock()
		return b.ErrClosed
	}
	if b.cur.Load() != s || b.InstallNextLocked() {
		b.Mu.Unlock()
		return nil
	}
	joined := b.run != nil // a fetch started before this call, maybe while Redis was away
	r := b.StartLocked()
	b.Mu.Unlock()
	if b.Waiting != nil {
		b.Waiting()
	}
	if err := r.Wait(ctx); err != nil {
		b.Mu.Lock()
		last := b.last
		b.Mu.Unlock()
		return &WaitError{Err: err, Last: last}
	}
	if r.err != nil {
		if errors.Is(r.err, b.ErrClosed) {
			return b.ErrClosed
		}
		if joined && ctx.Err() == nil && (b.Final == nil || !b.Final(r.err)) {
			// That fetch's failure may predate this call (Redis back
			// since): the caller tries once more, with a fetch of its own.
			return nil
		}
		return r.err
	}
	return nil
}

// NewGeneration is the generation a fetch creates {ns}:meta with if it
// finds none: new each time, as a claim's (coord) is, so the owners of a
// registry made anew by a counter or a sequence are never taken for
// owners from before it when Redis loses its data again (renew.lua).
func NewGeneration(r io.Reader) string {
	b := make([]byte, 16)
	_, _ = io.ReadFull(r, b)
	return hex.EncodeToString(b)
}
