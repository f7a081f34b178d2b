package node

import (
	"context"
	"errors"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
)

// NextID returns the next ID, from the current mode's source.
func (n *Node) NextID(ctx context.Context) (uint64, error) {
	parent := ctx
	ctx, cancel := n.waitContext(ctx)
	defer cancel()
	waited := false
	for {
		s := n.src.Load()
		var id uint64
		var err error
		switch {
		case s.gen != nil:
			id, err = s.gen.NextIDContext(ctx)
		case s.ctr != nil:
			id, err = s.ctr.NextID(ctx)
		default:
			err = s.err
		}
		if err == nil {
			return id, nil
		}
		if !n.againOrWait(ctx, s, err, &waited) {
			return 0, n.waitError(parent, err)
		}
	}
}

// TryNextIDs fills dst with strictly increasing IDs if the current source
// can issue all of them at once, and reports whether it did. It never
// waits on the clock or Redis; when it reports false nothing was issued,
// and NextIDs (which may wait, switch modes or fail) is the way on. The
// daemon's event loops call it so that one waiting client cannot stall the
// others.
func (n *Node) TryNextIDs(dst []uint64) bool {
	s := n.src.Load()
	switch {
	case s.gen != nil:
		return s.gen.TryNextIDs(dst)
	case s.ctr != nil:
		return s.ctr.TryNextIDs(dst)
	}
	return false
}

// NextIDs fills dst with strictly increasing IDs and returns how many it
// filled: len(dst), or fewer with an error.
func (n *Node) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	parent := ctx
	ctx, cancel := n.waitContext(ctx)
	defer cancel()
	waited := false
	filled := 0
	for filled < len(dst) {
		s := n.src.Load()
		var got int
		var err error
		switch {
		case s.gen != nil:
			got, err = s.gen.NextIDs(ctx, dst[filled:])
		case s.ctr != nil:
			got, err = s.ctr.NextIDs(ctx, dst[filled:])
		default:
			err = s.err
		}
		filled += got
		if err != nil && !n.againOrWait(ctx, s, err, &waited) {
			return filled, n.waitError(parent, err)
		}
	}
	return filled, nil
}

// again runs when source s failed with err: it reports whether the caller
// should retry on a newer source. A source closed by a mode switch is
// retried once the switch is done. In auto mode a flake source that cannot
// issue (reservation refused, clock behind) is checked at once, so the
// caller gets a counter-mode ID rather than the error when falling back is
// right: in the monitor with IDWait (the caller retries meanwhile), in
// the caller's goroutine without.
func (n *Node) again(ctx context.Context, s *source, err error) bool {
	if n.src.Load() != s {
		return true
	}
	if errors.Is(err, flake.ErrClosed) || errors.Is(err, fallback.ErrClosed) {
		return n.awaitSwitch(ctx, s)
	}
	if n.opts.Mode != ModeAuto || s.gen == nil || ctx.Err() != nil {
		return false
	}
	if n.opts.IDWait > 0 {
		// The check may wait on Redis (a claim, the clock guard), which
		// ctx does not cut short: it runs now in the monitor, and the
		// caller, retrying while IDWait lasts, takes the new source when
		// it is there. Its wait stays bounded by IDWait.
		n.kick()
		return false
	}
	// A check already running (it may be waiting on Redis) is not waited
	// for.
	if !n.mu.TryLock() {
		return false
	}
	if n.src.Load() == s && !n.closed {
		n.checkLocked(ctx)
	}
	n.mu.Unlock()
	return n.src.Load() != s
}

// awaitSwitch waits out the switch that closed s, while ctx allows: a
// switch may be claiming through a slow Redis, and no caller waits on it
// past its own bound.
func (n *Node) awaitSwitch(ctx context.Context, s *source) bool {
	for n.src.Load() == s {
		if n.mu.TryLock() {
			n.mu.Unlock()
			return n.src.Load() != s
		}
		if clock.Sleep(ctx, n.opts.Clock, retryPause) != nil {
			return false
		}
	}
	return true
}
