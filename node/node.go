package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
)

// ErrInvalidOptions is wrapped by option errors.
var ErrInvalidOptions = errors.New("invalid node options")

// Options configure a Node. The zero value is a standalone node in flake
// mode with one machine ID and no state file.
type Options struct {
	// Redis is the fleet's Redis; nil runs standalone on an embedded
	// in-process store (miniredis): then the state file is what keeps
	// restarts unique, so set StateFile.
	Redis redis.UniversalClient
	// Registry configures the machine-ID registry (namespace, layout,
	// lease TTL, max skew, owner). Its Horizon defaults to
	// MaxLead + ReserveAhead + MaxSkew + one tick, and must be at least that.
	Registry coord.Options
	// StateFile is the local state file ("" for none: restarts then rely
	// on Redis alone).
	StateFile string
	// Mode is ModeFlake (default). ModeCounter and ModeAuto need the
	// counter fallback.
	Mode string
	// MachineIDs is how many machine IDs to lease: 1..256, default 1.
	MachineIDs int
	// MaxLead bounds how far ahead of the clock IDs may run: default 1s.
	MaxLead time.Duration
	// ReserveAhead is how far ahead each reservation reaches: default 2s.
	ReserveAhead time.Duration
	// Clock drives the generator; nil means the system clock.
	Clock flake.Clock
}

// Node is one flaked node: a lease on machine IDs plus a generator.
type Node struct {
	opts   Options
	mini   *miniredis.Miniredis
	rdb    redis.UniversalClient
	reg    *coord.Registry
	state  *coord.StateFile
	lease  *coord.Lease
	gen    *flake.Generator
	start  time.Time
	closed sync.Once
}

var _ Generator = (*Node)(nil)

// New starts a node: it opens the state file, claims machine IDs, and
// starts the generator after the IDs' reservations.
func New(ctx context.Context, opts Options) (*Node, error) {
	if opts.Mode == "" {
		opts.Mode = ModeFlake
	}
	if opts.Mode != ModeFlake {
		return nil, fmt.Errorf("%w: mode %q: this build supports %q (counter and auto modes are not built yet)",
			ErrInvalidOptions, opts.Mode, ModeFlake)
	}
	if opts.MachineIDs == 0 {
		opts.MachineIDs = 1
	}
	if opts.MachineIDs < 1 || opts.MachineIDs > 256 {
		return nil, fmt.Errorf("%w: machine IDs %d: valid range is 1..256", ErrInvalidOptions, opts.MachineIDs)
	}
	if opts.MaxLead == 0 {
		opts.MaxLead = flake.DefaultMaxLead
	}
	if opts.ReserveAhead == 0 {
		opts.ReserveAhead = flake.DefaultReserveAhead
	}
	if opts.MaxLead < 0 || opts.MaxLead > time.Hour {
		return nil, fmt.Errorf("%w: max lead %v: valid range is 0..1h", ErrInvalidOptions, opts.MaxLead)
	}
	if opts.ReserveAhead < 10*time.Millisecond || opts.ReserveAhead > time.Hour {
		return nil, fmt.Errorf("%w: reserve ahead %v: valid range is 10ms..1h", ErrInvalidOptions, opts.ReserveAhead)
	}
	n := &Node{opts: opts, start: time.Now(), rdb: opts.Redis}
	ro := opts.Registry
	if n.rdb == nil {
		// Standalone: this process is the only one that can ever see this
		// store, and the state file holds the only reservation that
		// matters, so the data-loss horizon is not needed.
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("standalone store: %w", err)
		}
		n.mini = mr
		n.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		ro.Horizon = time.Nanosecond
	}
	if ro.Layout.BitsTime == 0 {
		ro.Layout = flake.DefaultLayout()
	}
	minHorizon := opts.MaxLead + opts.ReserveAhead + max(ro.MaxSkew, coord.DefaultMaxSkew) + ro.Layout.TimeUnit
	if ro.Horizon == 0 {
		ro.Horizon = minHorizon
	}
	if ro.MaxWait == 0 {
		// A registry created a moment ago (a new fleet, or Redis that lost
		// its data) starts every ID a horizon ahead: wait for it.
		ro.MaxWait = ro.Horizon + coord.DefaultMaxWait
	}
	if n.mini == nil && ro.Horizon < minHorizon {
		n.cleanup()
		return nil, fmt.Errorf("%w: horizon %v is below max lead + reserve ahead + max skew + a tick = %v",
			ErrInvalidOptions, ro.Horizon, minHorizon)
	}
	reg, err := coord.NewRegistry(n.rdb, ro)
	if err != nil {
		n.cleanup()
		return nil, err
	}
	n.reg = reg
	var prev *coord.State
	if opts.StateFile != "" {
		n.state, prev, err = coord.OpenState(opts.StateFile)
		if err != nil {
			n.cleanup()
			return nil, err
		}
	}
	lease, err := reg.Claim(ctx, coord.ClaimOptions{Count: opts.MachineIDs, State: n.state, Previous: prev})
	if err != nil {
		n.cleanup()
		return nil, err
	}
	n.lease = lease
	l := reg.Layout()
	gen, err := flake.New(flake.Settings{
		BitsSequence: l.BitsSequence, BitsMachineID: l.BitsMachineID, TimeUnit: l.TimeUnit, StartTime: l.StartTime,
		MachineIDs: lease.MachineIDs(), MaxLead: opts.MaxLead,
		Floor: lease.Floor(), Reserved: lease.Granted(), Reserve: lease.Reserve, ReserveAhead: opts.ReserveAhead,
		Clock: opts.Clock,
	})
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx), lease.Floor())
		n.cleanup()
		return nil, err
	}
	n.gen = gen
	lease.KeepAlive(context.Background())
	return n, nil
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

// NextID returns the next ID.
func (n *Node) NextID(ctx context.Context) (uint64, error) { return n.gen.NextIDContext(ctx) }

// NextIDs fills dst with IDs.
func (n *Node) NextIDs(ctx context.Context, dst []uint64) (int, error) {
	return n.gen.NextIDs(ctx, dst)
}

// Mode returns the current mode.
func (n *Node) Mode() string { return ModeFlake }

// Layout returns the fleet layout.
func (n *Node) Layout() flake.Layout { return n.gen.Layout() }

// MachineIDs returns the leased machine IDs.
func (n *Node) MachineIDs() []int { return n.gen.MachineIDs() }

// Standalone reports whether the node runs on the embedded store.
func (n *Node) Standalone() bool { return n.mini != nil }

// Lease returns the node's lease (for audit and tests).
func (n *Node) Lease() *coord.Lease { return n.lease }

// Ready reports whether IDs can be issued now: the lease is held and the
// reservation has headroom, or the clock is within the reservation.
func (n *Node) Ready() bool {
	if n.lease.Err() != nil {
		return false
	}
	st := n.gen.Stats()
	return !st.Closed && st.Granted > st.Now
}

// Info returns INFO pairs.
func (n *Node) Info() [][2]string {
	st := n.gen.Stats()
	ls := n.lease.Stats()
	ids := make([]string, len(st.MachineIDs))
	for i, m := range st.MachineIDs {
		ids[i] = strconv.Itoa(m)
	}
	lastErr := ""
	if ls.LastErr != nil {
		lastErr = ls.LastErr.Error()
	}
	standalone := "no"
	if n.Standalone() {
		standalone = "yes"
	}
	return [][2]string{
		{"mode", n.Mode()},
		{"standalone", standalone},
		{"machine_ids", strings.Join(ids, ",")},
		{"namespace", n.reg.Options().Namespace},
		{"state_file", n.opts.StateFile},
		{"tick_now", strconv.FormatInt(st.Now, 10)},
		{"tick_last", strconv.FormatInt(st.Last, 10)},
		{"tick_reserved", strconv.FormatInt(st.Granted, 10)},
		{"tick_floor", strconv.FormatInt(st.Floor, 10)},
		{"lead_ms", strconv.FormatInt(st.Lead.Milliseconds(), 10)},
		{"reservation_headroom_ms", strconv.FormatInt(st.Headroom.Milliseconds(), 10)},
		{"nextid_waits", strconv.FormatUint(st.Waits, 10)},
		{"lease_renewals", strconv.FormatUint(ls.Renews, 10)},
		{"lease_renewal_failures", strconv.FormatUint(ls.RenewFails, 10)},
		{"lease_lost", strconv.FormatBool(ls.Lost)},
		{"lease_last_error", lastErr},
	}
}

// Close stops issuing, releases the leases with the exact last tick and
// flushes the state file. It is safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	var err error
	n.closed.Do(func() {
		last := n.gen.Close()
		err = n.lease.Release(ctx, last)
		n.cleanup()
	})
	return err
}
