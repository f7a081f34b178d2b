package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/statefile"
)

// Errors of a node.
var (
	// ErrInvalidOptions is wrapped by option errors.
	ErrInvalidOptions = errors.New("invalid node options")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("node is closed")
	// ErrClockBehind is wrapped when the clock is behind the floor of the
	// machine IDs this node could claim by more than MaxWait.
	ErrClockBehind = errors.New("clock is behind the machine ID's reservation")
	// ErrUnavailable is wrapped when the node has nothing to issue from:
	// in flake mode no lease is held, and it is being claimed again.
	ErrUnavailable = errors.New("no ID source available")
)

// source is what IDs are issued from at one time: a flake generator, the
// counter, or neither (err says why). It is where the node holds its
// generator or counter: a switch closes the old one and stores a new
// source, and callers that met the closed one wait for that (again).
type source struct {
	mode Mode
	gen  *flake.Generator
	ctr  *fallback.Counter
	err  error
}

// Node is one flaked node: leases on machine IDs, a flake generator and
// the counter fallback, behind one Generator.
type Node struct {
	src atomic.Pointer[source] // what NextID issues from

	opts  Options
	log   zerolog.Logger
	mini  *miniredis.Miniredis
	rdb   redis.UniversalClient
	reg   *coord.Registry
	state *statefile.File
	prev  *statefile.State // the state file as opened
	lost  []int            // the machine IDs of the last lease lost, preferred by the next claim
	maxW  int64            // MaxWait in ticks

	// mu serializes mode switches and lease changes; NextID takes it only
	// to wait out a switch.
	mu    sync.Mutex
	lease *coord.Lease
	// genLease is the lease the running generator issues under: n.lease,
	// or one lost to a possible data loss that it drains (drain.go).
	genLease *coord.Lease
	bound    int64 // highest tick any ID issued so far may have
	closed   bool
	reason   string // why the current mode was entered
	// healthy, retryAt, skewAt and flushAt are readings of the clock's
	// Monotonic, so a wall-clock step does not stretch or skip them.
	healthy       time.Duration // counter mode: since when flake looks healthy (0: not)
	retryAt       time.Duration // no claim attempt before this
	skewAt        time.Duration // next clock-guard check in auto mode
	claimErr      error         // the last claim failure
	warnedHorizon bool          // the fleet horizon shorter than ours was logged
	stateFailing  bool          // the state file could not be written, as last logged
	pending       [][]any       // mode events not written yet (Redis away)
	flushAt       time.Duration // no attempt to write them before this
	entered       Mode          // of the last mode event: ModeNone before the first
	switches      atomic.Uint64
	alarms        alarms                       // counts for the alert rules (alarms.go)
	monitor       atomic.Pointer[clock.Ticker] // the health checks
	seqs          seqState                     // named sequences (seq.go)
}

var _ TryGenerator = (*Node)(nil)

// New starts a node. In flake mode it claims machine IDs (preferring the
// state file's) and fails when it cannot; in counter mode it holds no
// lease; in auto mode it starts in counter mode when flake mode is not
// safe, and keeps trying to return.
func New(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, log: opts.Logger, rdb: opts.Redis, bound: -1}
	n.src.Store(&source{err: ErrUnavailable}) // until startLocked enters a mode
	if err := n.open(ctx); err != nil {
		n.cleanup()
		return nil, err
	}
	n.mu.Lock()
	err := n.startLocked(ctx)
	n.mu.Unlock()
	if err != nil {
		n.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	n.monitor.Store(clock.Every(opts.Clock, opts.CheckInterval, n.check))
	return n, nil
}

// open sets up what every mode needs: the state file, the store (an
// embedded one when standalone, on a clock that does not go below the
// state file), the registry and the counter's options (checked now, not
// at the first fallback). On failure the caller cleans up.
func (n *Node) open(ctx context.Context) error {
	standalone := n.rdb == nil
	ro, err := n.opts.registryOptions(standalone)
	if err != nil {
		return err
	}
	if n.opts.StateFile != "" {
		if n.state, n.prev, err = statefile.OpenFS(n.opts.StateFS, n.opts.StateFile, ro.Rand); err != nil {
			return err
		}
	}
	if standalone {
		n.opts.Clock = n.standaloneClock(ro)
		ro.Clock = n.opts.Clock
		if n.mini, err = startStore(n.opts.Clock); err != nil {
			return err
		}
		n.rdb = redis.NewClient(&redis.Options{Addr: n.mini.Addr()})
	}
	if n.reg, err = coord.NewRegistry(n.rdb, ro); err != nil {
		return err
	}
	if n.mini != nil {
		if err := n.reg.PrepareFresh(ctx); err != nil {
			return fmt.Errorf("standalone store: %w", err)
		}
	}
	n.maxW = int64(n.reg.Options().MaxWait / n.reg.Layout().TimeUnit)
	n.opts.Counter = n.opts.counterOptions(n.reg)
	c, err := fallback.New(n.rdb, n.opts.Counter)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

func (n *Node) cleanup() {
	if n.state != nil {
		n.state.Close()
	}
	if n.mini != nil {
		n.rdb.Close()
		n.mini.Close()
	}
}

// Mode returns the mode IDs are issued in now: ModeFlake or ModeCounter.
func (n *Node) Mode() Mode { return n.src.Load().mode }

// ConfiguredMode returns the mode the node was started with.
func (n *Node) ConfiguredMode() Mode { return n.opts.Mode }

// Layout returns the fleet layout.
func (n *Node) Layout() flake.Layout { return n.reg.Layout() }

// MachineIDs returns the leased machine IDs (none in counter mode without
// a lease).
func (n *Node) MachineIDs() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lease == nil {
		return nil
	}
	return n.lease.MachineIDs()
}

// Standalone reports whether the node runs on the embedded store.
func (n *Node) Standalone() bool { return n.mini != nil }

// Lease returns the node's current lease, or nil (for audit and tests).
func (n *Node) Lease() *coord.Lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease
}

// Switches returns how many times the node changed modes.
func (n *Node) Switches() uint64 { return n.switches.Load() }

// Close stops issuing, releases the leases with the exact last tick and
// flushes the state file. It is safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	last := n.src.Swap(&source{mode: n.modeLocked(), err: ErrClosed})
	if m := n.monitor.Load(); m != nil {
		m.Stop() // a check that starts now sees closed
	}
	defer n.mu.Unlock()
	if last.gen != nil {
		n.bound = max(n.bound, last.gen.Close())
	}
	if last.ctr != nil {
		last.ctr.Close()
	}
	seqErr := n.closeSeqs(ctx)
	// A "stopped" mode event tells audit (whois of counter IDs, history)
	// when this node stopped issuing; one last try for what is pending.
	n.flushAt = 0
	n.setModeLocked(ModeStopped, "close")
	var err error
	if n.lease != nil {
		err = n.lease.Release(ctx, n.bound)
		n.lease = nil
	}
	n.cleanup()
	return errors.Join(err, seqErr)
}
