package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
)

// Waiting for an ID instead of failing.
//
// A source can be unable to issue for a moment: no lease while the node
// claims again, a reservation Redis did not grant yet (slow, restarting),
// a new lease whose floor the clock has not reached, a counter segment
// refused. With Options.IDWait set (flaked serve: --id-wait) NextID and
// NextIDs keep trying for that long, so a caller sees a wait, not an
// error, for any gap shorter than it; past it they fail with an error that
// says what the node waits for and, when it knows, until when. Nothing is
// guessed meanwhile: a retry asks the same sources again.

// retryPause spaces the attempts of a waiting caller.
const retryPause = 5 * time.Millisecond

// waitContext bounds ctx by IDWait, when set.
func (n *Node) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if n.opts.IDWait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, n.opts.IDWait)
}

// againOrWait reports whether a caller whose source s failed with err
// should try again: at once on a newer source, after again's check the
// first time, then after a pause while IDWait lasts. A waiting caller
// runs again's check (which may claim) only once: the health checks go on
// meanwhile, so callers that wait do not add Redis calls of their own.
func (n *Node) againOrWait(ctx context.Context, s *source, err error, waited *bool) bool {
	if n.src.Load() != s {
		return true
	}
	if !*waited && n.again(ctx, s, err) {
		return true
	}
	if !n.retry(ctx, err) {
		return false
	}
	*waited = true
	return true
}

// retry reports whether a caller whose source failed with err should try
// again after a pause: IDWait is set, the wait bounded by ctx is not over,
// and the failure is one that passes (not a closed node, nor the end of
// the ID space).
func (n *Node) retry(ctx context.Context, err error) bool {
	if n.opts.IDWait <= 0 || errors.Is(err, ErrClosed) || errors.Is(err, flake.ErrOverTimeLimit) ||
		errors.Is(err, coord.ErrLayoutMismatch) || errors.Is(err, fallback.ErrLayoutMismatch) {
		return false
	}
	return clock.Sleep(ctx, n.opts.Clock, retryPause) == nil
}

// waitError is what a caller gets when IDWait ran out (parent, the
// caller's own context, did not end): err, the last failure, with what the
// node waits for.
func (n *Node) waitError(parent context.Context, err error) error {
	if n.opts.IDWait <= 0 || parent.Err() != nil || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: no ID within %v (--id-wait): waiting for %s: %w", ErrUnavailable, n.opts.IDWait, n.waitingFor(), err)
}

// waitingFor says what the current source waits for, and until when when
// it can tell.
func (n *Node) waitingFor() string {
	s := n.src.Load()
	l := n.reg.Layout()
	switch {
	case s.gen != nil:
		st := s.gen.Stats()
		lead := int64(n.opts.MaxLead / l.TimeUnit)
		next := max(st.Floor, st.Last) + 1
		var why []string
		if next > st.Now+lead {
			why = append(why, fmt.Sprintf("the clock to reach the machine IDs' next tick (IDs resume at %s at the earliest)",
				l.TickTime(next-lead).UTC().Format(time.RFC3339Nano)))
		}
		if next > st.Granted {
			why = append(why, fmt.Sprintf("Redis to extend the reservation (granted up to %s)",
				l.TickTime(st.Granted+1).UTC().Format(time.RFC3339Nano)))
		}
		if len(why) == 0 {
			return "the generator"
		}
		return strings.Join(why, ", and ")
	case s.ctr != nil:
		return "Redis to hand out a counter segment"
	}
	return fmt.Sprintf("a machine ID (claims retried every %v)", n.opts.RetryInterval)
}
