//go:build simbugs

package bugs

// The switches, settable in a simbugs build.
var (
	// StateFileToken: a claim takes the owner token from the state file
	// instead of a new one, so two processes started from copies of one
	// file hold the same lease and renew it for each other (fencing by
	// state-file token only).
	StateFileToken bool
	// IssuePastReservation: the generator issues up to the clock plus its
	// lead whether or not the ticks were reserved.
	IssuePastReservation bool
	// ReleaseBelowUsed: a clean shutdown records the lease's floor as the
	// last tick used, below the ticks it did use.
	ReleaseBelowUsed bool
	// CounterFleetWide: the counter machine ID is the last of the whole
	// machine space, not of the layout's region, so every region's
	// counter issues under one machine ID (and region 0 leases past its
	// half).
	CounterFleetWide bool
	// ReplicaWaitOff: a grant is used without WAIT confirming it on the
	// fleet's replicas (internal/replwait), so an old master cut off from
	// them keeps granting while a replica promoted in its place grants
	// too.
	ReplicaWaitOff bool
	// MinReplicasIgnored: a grant waits for the mark alone, not for
	// --min-replicas when that is higher (internal/replwait's Floor).
	MinReplicasIgnored bool
	// The Sentinel rule (internal/replwait, sentinel.go), each weakened:
	// SentinelQuorum: a majority of the Sentinels vouching is enough, the
	// others' answers ignored. SentinelNoMaxCheckAge: a check vouches up
	// to the down-after bound, however long after the check the grant
	// came. SentinelRunIDUnchecked: the master a Sentinel names
	// is not compared with the server that granted. SentinelFailoverIgnored:
	// failover_in_progress does not refuse. SentinelReplicasIgnored: a
	// grant the Sentinels do not vouch for waits for the mark alone, not
	// for every replica they know.
	SentinelQuorum          bool
	SentinelNoMaxCheckAge   bool
	SentinelRunIDUnchecked  bool
	SentinelFailoverIgnored bool
	SentinelReplicasIgnored bool
)
