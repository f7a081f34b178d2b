package coord

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/bugs"
	"github.com/flaked/flaked/statefile"
)

// Lease is a set of machine IDs held under one owner token. Its Reserve
// method is the generator's flake.Settings.Reserve hook.
type Lease struct {
	reg        *Registry
	token      string
	ids        []int
	floor      int64
	generation string
	events     []string
	granted    atomic.Int64

	// DataLoss is set when the claim or a renewal found that Redis lost the
	// registry this owner (or its state file) knew, or may have lost writes
	// (it restarted or failed over).
	DataLoss bool
	// Clone is "host pid" of a live process that holds the state file's
	// machine ID under the same node ID: it runs from a copy of this
	// node's state file (or this node from a copy of its). "" when none.
	Clone  string
	lastOK int64 // Redis ms of the last successful claim or renewal
	// lossID is guard.lua's name of the last possible data loss, as of the
	// last successful claim or renewal: under another one the lease is
	// not extended (renew.lua).
	lossID string
	nodeID string // the state file's node ID, or ""
	// horizon is the fleet's (ticks): the longer of ours and {ns}:meta's
	// at the claim. A renewal restores it if Redis lost it.
	horizon int64

	mu       sync.Mutex // serializes renew, reserve, release and state saves
	mode     string
	state    *statefile.File
	released bool

	lost     atomic.Bool
	lostOnce sync.Once
	lostCh   chan struct{}
	lostErr  error
	onLost   func()

	renews, renewFails atomic.Uint64
	lastRenew          atomic.Int64 // unix ms of the last successful renewal
	lastErr            atomic.Pointer[error]
	stateErr           atomic.Pointer[error] // the last state-file write, when it failed

	keep *clock.Ticker // KeepAlive's renewals
}

// MachineIDs returns the leased machine IDs, in claim order.
func (l *Lease) MachineIDs() []int { return append([]int(nil), l.ids...) }

// Token returns the owner token.
func (l *Lease) Token() string { return l.token }

// Floor is the last tick the new owner must not use: the generator starts
// after it.
func (l *Lease) Floor() int64 { return l.floor }

// Granted is the highest tick reserved in Redis (and in the state file).
func (l *Lease) Granted() int64 { return l.granted.Load() }

// Generation is the registry generation the lease was claimed in.
func (l *Lease) Generation() string { return l.generation }

// ClaimEvents are the audit event kinds of the claim (claim, takeover,
// reclaim), one per machine ID.
func (l *Lease) ClaimEvents() []string { return append([]string(nil), l.events...) }

// Done is closed when the lease is lost (another owner holds an ID, or
// its reservation moved past ours). Then Err says why.
func (l *Lease) Done() <-chan struct{} { return l.lostCh }

// Err is why the lease was lost, or nil.
func (l *Lease) Err() error {
	if !l.lost.Load() {
		return nil
	}
	return l.lostErr
}

// SetMode records the node's mode in the owner hash at the next renewal.
func (l *Lease) SetMode(mode string) {
	l.mu.Lock()
	l.mode = mode
	l.mu.Unlock()
}

// LeaseStats is a snapshot for metrics and INFO.
type LeaseStats struct {
	Renews, RenewErrors uint64
	LastRenew           time.Time
	LastError           error
	Lost                bool
	Granted             int64
	// StateErr is why the state file could not be written, while it
	// cannot (disk full, read-only): IDs go on from Redis's reservations.
	StateErr error
}

// Stats returns a snapshot.
func (l *Lease) Stats() LeaseStats {
	s := LeaseStats{
		Renews:      l.renews.Load(),
		RenewErrors: l.renewFails.Load(),
		Lost:        l.lost.Load(),
		Granted:     l.granted.Load(),
	}
	if ms := l.lastRenew.Load(); ms > 0 {
		s.LastRenew = time.UnixMilli(ms)
	}
	if p := l.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	if p := l.stateErr.Load(); p != nil {
		s.StateErr = *p
	}
	return s
}

// markLost records why the lease is lost; l.mu is held.
func (l *Lease) markLost(err error) {
	l.lostOnce.Do(func() {
		l.lostErr = err
		l.lost.Store(true)
		close(l.lostCh)
		if l.onLost != nil {
			l.onLost()
		}
	})
}

// OnLost has f called once when the lease is lost, in the goroutine that
// finds out (at once if it is lost already), so a node reacts at once
// rather than at its next health check. f must not block or call back
// into the lease.
func (l *Lease) OnLost(f func()) {
	l.mu.Lock()
	l.onLost = f
	l.mu.Unlock()
	if l.lost.Load() {
		f()
	}
}

// Reserve raises the reservation of every leased ID to upTo in Redis, then
// fsyncs it to the state file, then returns it: the flake.Settings.Reserve
// hook. It fails, granting nothing new, when the lease is lost or Redis or
// the disk fail; the generator then keeps issuing only what it holds.
//
// A renewal the replicas did not acknowledge (ErrNotReplicated) fails the
// same way, and is no reason to stop issuing below what was granted and
// acknowledged before: renew.lua ran on the master, so it only raised the
// reservation stored there, and every claim of these IDs starts above the
// stored reservation, by whoever makes it; where the master lost that
// renewal (a replica promoted without it), the promoted replica holds
// every acknowledged grant and its loss floor (its promotion + the
// Redis clocks' skew + the horizon, guard.lua) is above every grant made
// before the promotion, acknowledged or not. So what the generator holds
// stays its own to issue for the whole reach, whatever the replicas do;
// only what it was not granted yet waits for them.
func (l *Lease) Reserve(ctx context.Context, upTo int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return 0, ErrReleased
	}
	if err := l.Err(); err != nil {
		return 0, err
	}
	got, err := l.renewLocked(ctx, upTo)
	if err != nil {
		return 0, err
	}
	if err := l.saveLocked(got, false); err != nil && l.reg.opts.Private {
		return 0, fmt.Errorf("reservation: %w", err)
	}
	l.granted.Store(max(l.granted.Load(), got))
	return got, nil
}

// Renew extends the leases and writes a heartbeat without raising the
// reservation. KeepAlive calls it every LeaseTTL/3.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return ErrReleased
	}
	if err := l.Err(); err != nil {
		return err
	}
	_, err := l.renewLocked(ctx, l.granted.Load())
	return err
}

func (l *Lease) renewLocked(ctx context.Context, want int64) (int64, error) {
	r := l.reg
	o, lay := r.opts.Owner, r.opts.Layout
	keys, argv := contract.RenewArgs{
		Keys: r.keys, Token: l.token, Want: want, Held: l.granted.Load(), LeaseTTLMs: r.opts.LeaseTTL.Milliseconds(),
		EventsMaxLen: r.opts.EventsMaxLen, Mode: l.mode, Host: o.Host, PID: o.PID, Addr: o.Addr, Version: o.Version,
		Layout: lay.String(), Generation: l.generation, Horizon: r.opts.horizonTicks(),
		EpochUs: lay.StartTime.UnixMicro(), TickUs: tickMicros(lay), Node: l.nodeID, LossID: l.lossID,
		FleetHorizon: l.horizon, Identity: r.opts.RedisIdentity, MachineIDs: l.ids,
	}.KeysArgv()
	v, _, err := r.wait.Run(ctx, r.rdb, renewScript, keys, argv, renewNeedAt, r.opts.ReplicaWait)
	if err != nil {
		l.renewFails.Add(1)
		err = fmt.Errorf("renew lease of machine IDs %v: %w", l.ids, err)
		l.lastErr.Store(&err)
		return 0, err
	}
	if v[0] == "LOST" {
		l.renewFails.Add(1)
		var err error
		kind := fmt.Sprint(v[4])
		text := contract.LostText(kind, fmt.Sprint(v[2]), lay.String())
		switch kind {
		case contract.LostLayout:
			err = fmt.Errorf("%w: %w: %s; start it with the fleet's layout flags", ErrLeaseLost, ErrLayoutMismatch, text)
		case contract.LostFenced:
			err = fmt.Errorf("%w: %w: machine ID %v taken over by %v pid %v", ErrLeaseLost, ErrFenced, v[1], v[5], v[6])
		case contract.LostLoss:
			err = fmt.Errorf("%w: %w: machine ID %v: %s", ErrLeaseLost, ErrPossibleLoss, v[1], text)
		default:
			err = fmt.Errorf("%w: machine ID %v: %s", ErrLeaseLost, v[1], text)
		}
		l.lastErr.Store(&err)
		l.markLost(err)
		return 0, err
	}
	got := toInt64(v[1])
	if how := fmt.Sprint(v[2]); how != "" {
		l.DataLoss = true
	}
	l.lastOK, l.lossID = toInt64(v[3]), fmt.Sprint(v[4])
	l.renews.Add(1)
	l.lastRenew.Store(r.opts.Clock.Now().UnixMilli())
	l.lastErr.Store(nil)
	return got, nil
}

// KeepAlive renews the lease every LeaseTTL/3 on the registry's clock
// until Release or Abandon, or the lease is lost. Failures are counted and
// retried; they never extend what the generator may issue.
func (l *Lease) KeepAlive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep != nil || l.released {
		return
	}
	period := l.reg.opts.LeaseTTL / 3
	l.keep = clock.Every(l.reg.opts.Clock, period, func() {
		if l.lost.Load() {
			l.stopKeepAlive()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), period)
		_ = l.Renew(ctx)
		cancel()
	})
}

// Abandon stops renewing without releasing: the lease expires after its
// TTL and the reservation stays as granted. It is what a crash looks like
// to the fleet; fault tests use it.
func (l *Lease) Abandon() { l.stopKeepAlive() }

// stopKeepAlive stops the renewals; one in flight finishes (it holds l.mu,
// so a release after it waits for it).
func (l *Lease) stopKeepAlive() {
	l.mu.Lock()
	keep := l.keep
	l.mu.Unlock()
	if keep != nil {
		keep.Stop()
	}
}

// Check is sonyflake's CheckMachineID: true only when Redis says every
// leased ID is held by this token.
func (l *Lease) Check(ctx context.Context) (bool, error) {
	keys, argv := contract.CheckArgs{Keys: l.reg.keys, Token: l.token, MachineIDs: l.ids}.KeysArgv()
	n, err := checkScript.Run(ctx, l.reg.rdb, keys, argv...).Int()
	if err != nil {
		return false, fmt.Errorf("check lease: %w", err)
	}
	return n == 1, nil
}

// Release gives the leases back, recording lastTick, the highest tick the
// generator used (flake.Generator.Close returns it), as the reservation in
// Redis and in the state file, so a clean restart starts at once. The
// caller must have stopped issuing.
func (l *Lease) Release(ctx context.Context, lastTick int64) error {
	l.stopKeepAlive()
	return l.release(ctx, lastTick)
}

func (l *Lease) release(ctx context.Context, lastTick int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	lastTick = max(lastTick, l.floor)
	if bugs.ReleaseBelowUsed {
		lastTick = l.floor
	}
	r := l.reg
	o, lay := r.opts.Owner, r.opts.Layout
	keys, argv := contract.ReleaseArgs{
		Keys: r.keys, Token: l.token, LastTick: lastTick, EventsMaxLen: r.opts.EventsMaxLen, Host: o.Host, PID: o.PID, Addr: o.Addr,
		Generation: cmp.Or(l.generation, newToken(r.opts.Rand)), EpochUs: lay.StartTime.UnixMicro(), TickUs: tickMicros(lay),
		Identity: r.opts.RedisIdentity, MachineIDs: l.ids,
	}.KeysArgv()
	err := contract.Explain(releaseScript.Run(ctx, r.rdb, keys, argv...).Err())
	if err != nil {
		err = fmt.Errorf("release machine IDs %v: %w", l.ids, err)
	}
	// The state file records the exact last tick even when Redis is away:
	// Redis then keeps the higher reservation, which is only safer.
	if serr := l.saveLocked(lastTick, true); serr != nil && err == nil {
		err = serr
	}
	return err
}

// saveLocked writes the state file, if the lease has one, and records
// whether it could.
func (l *Lease) saveLocked(reservation int64, released bool) error {
	if l.state == nil {
		return nil
	}
	err := l.state.Save(statefile.State{
		Namespace:   l.reg.opts.Namespace,
		Layout:      l.reg.opts.Layout.String(),
		MachineIDs:  l.ids,
		Reservation: reservation,
		Token:       l.token,
		Generation:  l.generation,
		Released:    released,
		Updated:     l.reg.opts.Clock.Now(),
	})
	if err != nil {
		l.stateErr.Store(&err)
	} else {
		l.stateErr.Store(nil)
	}
	return err
}
