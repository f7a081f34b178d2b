package sim

import (
	"math/rand/v2"
	"time"

	"github.com/flaked/flaked/internal/simredis"
)

// deployment is the fleet's Redis: a master, a replica that catches up
// with it every ReplicaLag, snapshots and backups. The master is one
// simulated server whose data and identity are replaced by a failover or
// a restart: that is all the fleet can see of either. A split brain adds
// a second server: the old master, still reached by some nodes for a
// while after the replica was promoted in its place.
type deployment struct {
	w       *world
	rng     *rand.Rand
	srv     *simredis.Server
	clock   *serverClock     // srv's
	replica *simredis.Data   // what the replica has received
	saved   *simredis.Data   // the last snapshot on disk
	backups []*simredis.Data // older snapshots kept by the operator

	downUntil, slowUntil time.Duration
	slow                 time.Duration

	// Split brain: old accepts the writes of the nodes in oldNodes until
	// oldUntil.
	old      *simredis.Server
	oldNodes map[int]bool
	oldUntil time.Duration
	// retired are servers that ran scripts and are gone (coverage).
	retired []*simredis.Server
	// Eviction: keys evicted every evictEvery until evictUntil.
	evictUntil time.Duration
}

// serverClock is one server's clock: virtual time, off by skew.
type serverClock struct {
	w    *world
	skew time.Duration
}

func (c *serverClock) now() time.Time { return c.w.epoch.Add(c.w.now + c.skew) }

func newDeployment(w *world, rng *rand.Rand) *deployment {
	d := &deployment{w: w, rng: rng, clock: &serverClock{w: w}}
	d.srv = simredis.New(d.clock.now, rng)
	d.replicate()
	d.saved = d.replica
	return d
}

// master is the server node i reaches now.
func (d *deployment) master(i int) *simredis.Server {
	if d.old != nil {
		if d.w.now < d.oldUntil {
			if d.oldNodes[i] {
				return d.old
			}
		} else {
			// The old master rejoins as a replica: its writes are gone.
			d.retired = append(d.retired, d.old)
			d.old, d.oldNodes = nil, nil
		}
	}
	return d.srv
}

// replicate brings the replica up to date; it acknowledges what it has.
func (d *deployment) replicate() {
	d.replica = d.srv.Snapshot()
	d.srv.SetReplicas(d.replica.Offset())
}

// save writes a snapshot.
func (d *deployment) save() { d.saved = d.srv.Snapshot() }

// backup keeps a copy of the last snapshot.
func (d *deployment) backup() {
	d.backups = append(d.backups, d.saved)
}

// oldest is the oldest backup (or nothing, before the first).
func (d *deployment) oldest() *simredis.Data {
	if len(d.backups) == 0 {
		return nil
	}
	return d.backups[0]
}

// failover promotes the replica: what it had not received is lost. It
// runs on another machine, whose clock is off: every server's within
// ±500 ms, so any two within the 1 s the scripts allow for (guard.lua's
// redisSkewMs), unless behind is set: then the new master's clock is that
// much behind the old one's (Redis clocks further apart than the scripts
// allow for).
func (d *deployment) failover(behind time.Duration) {
	if behind > 0 {
		d.clock.skew -= behind
	} else {
		d.clock.skew = time.Duration(d.rng.Int64N(int64(time.Second))) - 500*time.Millisecond
	}
	d.srv.Promote(d.replica)
	d.replicate()
}

// splitBrain promotes the replica while the old master, cut off from it
// and from Sentinel but not from the nodes in reach, goes on accepting
// their writes for d. The old master keeps listing its replica (with the
// offset it had) until repl-timeout, as Redis does: WAIT on it gets 0.
func (d *deployment) splitBrain(reach map[int]bool, dur time.Duration) {
	if d.old != nil { // one split at a time: the older one ends now
		d.retired = append(d.retired, d.old)
	}
	old := d.srv
	old.SetReplicas(d.replica.Offset())
	d.clock = &serverClock{w: d.w, skew: time.Duration(d.rng.Int64N(int64(time.Second))) - 500*time.Millisecond}
	d.srv = simredis.New(d.clock.now, d.rng)
	d.srv.Promote(d.replica)
	d.replicate()
	d.old, d.oldNodes, d.oldUntil = old, reach, d.w.now+dur
}

// restart restarts the master with data (nil: none).
func (d *deployment) restart(data *simredis.Data) {
	d.srv.Restart(data)
	d.replicate()
}

// coverage is what the deployment's servers counted of the scripts'
// branches.
func (d *deployment) coverage() []uint64 {
	c := d.srv.Coverage(nil)
	for _, s := range d.retired {
		c = s.Coverage(c)
	}
	if d.old != nil {
		c = d.old.Coverage(c)
	}
	return c
}
