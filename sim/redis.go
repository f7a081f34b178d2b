package sim

import (
	"math/rand/v2"
	"time"

	"github.com/flaked/flaked/internal/simredis"
)

// deployment is the fleet's Redis: a master, a replica that catches up
// with it every ReplicaLag, snapshots and backups. The master is one
// simulated server whose data and identity are replaced by a failover or
// a restart: that is all the fleet can see of either.
type deployment struct {
	w       *world
	rng     *rand.Rand
	srv     *simredis.Server
	skew    time.Duration    // the master's clock, off virtual time
	replica *simredis.Data   // what the replica has received
	saved   *simredis.Data   // the last snapshot on disk
	backups []*simredis.Data // older snapshots kept by the operator

	downUntil, slowUntil time.Duration
	slow                 time.Duration
}

func newDeployment(w *world, rng *rand.Rand) *deployment {
	d := &deployment{w: w, rng: rng}
	d.srv = simredis.New(func() time.Time { return w.epoch.Add(w.now + d.skew) }, rng)
	d.replica = d.srv.Snapshot()
	d.saved = d.replica
	return d
}

// replicate brings the replica up to date.
func (d *deployment) replicate() { d.replica = d.srv.Snapshot() }

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
// redisSkewMs).
func (d *deployment) failover() {
	d.skew = time.Duration(d.rng.Int64N(int64(time.Second))) - 500*time.Millisecond
	d.srv.Promote(d.replica)
	d.replica = d.srv.Snapshot()
}

// restart restarts the master with data (nil: none).
func (d *deployment) restart(data *simredis.Data) {
	d.srv.Restart(data)
	d.replica = d.srv.Snapshot()
}

// coverage is what the deployment's servers counted of the scripts'
// branches.
func (d *deployment) coverage() []uint64 { return d.srv.Coverage(nil) }
