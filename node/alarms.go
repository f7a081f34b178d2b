package node

import (
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Alarms counts what the node recovered from by itself but an operator
// must still look into: the node claims other machine IDs and goes on, so
// its mode and readiness soon look healthy again, and only a count that
// never goes down tells a scrape (and an alert rule) that it happened.
// The daemon exports them as flaked_node_leases_lost_total and so on.
type Alarms struct {
	// LeasesLost: leases the node lost (expired while it was cut off from
	// Redis, taken over, fenced, or refused after Redis lost writes).
	LeasesLost uint64
	// LeasesFenced: of those, leases taken over by a process started from
	// a copy of this node's state file.
	LeasesFenced uint64
	// DataLosses: claims that found Redis had lost the registry or may
	// have lost writes (a restart without persistence, a failover).
	DataLosses uint64
	// Clones: claims that found the state file's machine ID held by a live
	// process with the same state-file node ID (a copy of the file).
	Clones uint64
}

type alarms struct {
	leasesLost, leasesFenced, dataLosses, clones atomic.Uint64
}

// Alarms returns the node's alarm counts since it started.
func (n *Node) Alarms() Alarms {
	a := &n.alarms
	return Alarms{LeasesLost: a.leasesLost.Load(), LeasesFenced: a.leasesFenced.Load(),
		DataLosses: a.dataLosses.Load(), Clones: a.clones.Load()}
}

// Store is the Redis the node coordinates through: the fleet's, or the
// embedded store of a standalone node. For reading the registry (the
// audit of the daemon's status page); the node owns it, so it is not to
// be closed.
func (n *Node) Store() redis.UniversalClient { return n.rdb }
