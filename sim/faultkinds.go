package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/flaked/flaked/internal/simredis"
)

// Fault kinds beyond the first fourteen: every fault of the README's
// Guarantees and every case of its "What it does not cover" is one the
// simulator can draw. They come from streams of their own (drawDeployment,
// drawPatterns), so every other draw of a seed is what it was before.
const (
	// Eviction: Redis over its maxmemory evicts keys, for For, under
	// volatile-* (only keys with a TTL: the leases) or allkeys-* (any key).
	FaultEvictVolatile = "redis-evict-volatile"
	FaultEvictAllKeys  = "redis-evict-allkeys"
	// A split brain: the replica is promoted while the old master, cut off
	// from it but not from some nodes (Reach), accepts their writes for For.
	FaultSplitBrain = "redis-split-brain"
	// INFO refused to the nodes' user (NOPERM on INFO server and
	// replication) or renamed (rename-command), from At for For; a failover
	// that loses writes happens meanwhile.
	FaultInfoNoPerm  = "redis-info-noperm"
	FaultInfoRenamed = "redis-info-renamed"
	// A failover to a replica whose clock is Delay behind the old
	// master's: more than the 1 s the scripts allow for.
	FaultRedisSkew = "redis-failover-skewed"
	// Keys rewritten by hand in a running server (RESTORE of old values,
	// DEBUG RELOAD of an old file): the identity does not change. All: every
	// key of the last backup; else 1-3 of them.
	FaultRewrite = "redis-rewrite"
	// A stray after a total loss: Redis loses everything, a node with
	// another layout starts at once and retries while every owner of the
	// fleet's layout is away (cut off or paused), then Redis loses
	// everything again or goes back to an older copy (the two variants
	// of seeds 26890 and 119277). A pattern of other faults, counted under
	// this name. The stray must never lease or issue (Failure "stray let
	// in"): only flaked init makes a registry, and only a process that ran
	// under it restores one.
	FaultStrayAfterLoss = "stray-after-loss"
	// Two windows the replicas high-water mark leaves open with two
	// replicas (patterns of other faults, counted under these names): the
	// master restarts (with nothing, or from its last snapshot, whose mark
	// may be older) and, within 3 s, while its replicas reconnect, is cut
	// off from the Sentinels (or without them a replica is promoted) with
	// the other replica on its side; and two promotions 1-15 s apart
	// (forced failovers, or a failover then a split brain), the second
	// while the first's old master or left-behind replica follows the
	// master being replaced. The mark counts replicas: one that
	// acknowledges the old master's grants satisfies it while another is
	// promoted.
	FaultRestartSplit = "restart-then-split"
	FaultSuccessive   = "successive-promotions"
	// With Sentinels: SENTINEL FAILOVER, then its leader's process stops
	// for 1-6 s while the failover re-points the other replica (0.4-2.5 s
	// after it began), and a node subscribed to the leader loses requests
	// so it dials again meanwhile. Back, the leader has forgotten the
	// failover: every Sentinel names the old master, up, with no failover,
	// while the promoted replica runs as a second master until the others
	// turn it back into a replica (8 s after they see it).
	FaultLeaderRestart = "sentinel-leader-restart"
)

// Uncovered are the fault kinds the guards do not cover yet: the normal
// seed set never draws them; `flaked-sim exposure` measures what they
// cost. A kind whose guard lands moves into the normal seed set by being
// removed from this list (and given a draw weight in coveredWeights).
var Uncovered = []string{
	FaultRedisSkew,     // documented limit: keep Redis hosts on NTP (a restore on the skewed server)
	FaultRewrite,       // documented limit: no identity change to see
	FaultRestartSplit,  // the mark counts replicas: --min-replicas below the replicas kept leaves it open
	FaultSuccessive,    // the same
	FaultLeaderRestart, // a restarted Sentinel forgets its failover: the Sentinel rule's premise fails
}

// Exposable are the kinds `flaked-sim exposure` can force.
var Exposable = []string{FaultSplitBrain, FaultInfoNoPerm, FaultInfoRenamed, FaultEvictAllKeys, FaultEvictVolatile,
	FaultRedisSkew, FaultRewrite, FaultStrayAfterLoss, FaultRestartSplit, FaultSuccessive, FaultLeaderRestart}

// coveredWeights are how often a schedule of the normal seed set draws
// one of the new kinds (in 1000), unless Uncovered lists it.
var coveredWeights = map[string]int{
	FaultEvictVolatile:  120,
	FaultSplitBrain:     120,
	FaultInfoNoPerm:     60,
	FaultInfoRenamed:    60,
	FaultEvictAllKeys:   60,
	FaultRedisSkew:      60,
	FaultRewrite:        60,
	FaultStrayAfterLoss: 60,
}

// drawDeployment draws the new deployment faults of the normal seed set
// from a stream of their own.
func (s *Schedule) drawDeployment(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0xfa17))}
	for _, kind := range Exposable { // a fixed order: part of what a seed means
		if x.IntN(1000) < coveredWeights[kind] && !slices.Contains(Uncovered, kind) {
			s.Faults = append(s.Faults, x.deploymentFault(*s, kind)...)
		}
	}
}

// WithExposure returns s with faults of kind added (one or two), drawn from
// a stream of their own: a schedule of `flaked-sim exposure`.
func (s Schedule) WithExposure(kind string) Schedule {
	x := drawer{rand.New(rand.NewPCG(s.Seed, 0xe7905))}
	// Without the failover-then-split pattern: a promotion or loss forced
	// in just before its two promotions would make them the uncovered
	// successive-promotions window, whatever the kind measured.
	s.Faults = slices.DeleteFunc(slices.Clone(s.Faults), func(f Fault) bool { return f.pattern == PatternFailoverSplit })
	for range 1 + x.IntN(2) {
		s.Faults = append(s.Faults, x.deploymentFault(s, kind)...)
	}
	s.Exposure = kind
	sortFaults(s.Faults)
	return s
}

// deploymentFault draws one fault of kind, with the faults that make it
// matter (a failover while INFO is refused).
func (d drawer) deploymentFault(s Schedule, kind string) []Fault {
	n := len(s.Nodes)
	f := Fault{At: d.dur(time.Second, s.Duration-time.Second), Kind: kind}
	switch kind {
	case FaultEvictVolatile, FaultEvictAllKeys:
		f.For, f.Delay = d.dur(5*time.Second, 30*time.Second), d.dur(100*time.Millisecond, 2*time.Second)
	case FaultSplitBrain:
		// Some nodes (not none, not all) stay on the old master, for up to
		// two lease TTLs: longer than a lease, so both masters grant it.
		f.Reach = 1 + uint(d.IntN(1<<n-2))
		f.For = d.dur(300*time.Millisecond, 2*s.LeaseTTL)
	case FaultInfoNoPerm, FaultInfoRenamed:
		// The servers are configured so from the start (the identity was
		// never readable: {ns}:meta holds none), and a failover loses writes.
		f.At, f.For = 0, s.Duration
		out := []Fault{f}
		for range 2 + d.IntN(3) {
			out = append(out, Fault{At: d.dur(time.Second, s.Duration-time.Second), Kind: FaultFailover})
		}
		return out
	case FaultRedisSkew:
		f.Delay = d.dur(1100*time.Millisecond, 5*time.Second)
	case FaultRewrite:
		// And a node restarts without its state file just after: a claim
		// that may find a lease the rewrite removed.
		f.All = d.IntN(2) == 0
		return []Fault{f, {At: f.At + d.dur(0, 500*time.Millisecond), Kind: FaultCrash, Node: d.IntN(n),
			For: d.dur(0, 200*time.Millisecond), State: StateNone}}
	case FaultStrayAfterLoss:
		// Redis loses everything; a stray starts at once (its supervisor
		// retries it every second); every other node is away meanwhile,
		// cut off or paused, for up to a lease TTL and a few seconds, so
		// nothing restores the registry for a while; then, inside or after
		// that time, Redis loses everything again (seed 26890) or goes
		// back to its oldest backup (seed 119277).
		stray := d.IntN(n)
		out := []Fault{f,
			{At: f.At, Kind: FaultRestartEmpty},
			{At: f.At + d.dur(0, 200*time.Millisecond), Kind: FaultCrash, Node: stray, For: d.dur(0, 200*time.Millisecond), State: StateNone, Layout: true},
		}
		away := d.dur(time.Second, s.LeaseTTL+3*time.Second)
		for i := range n {
			if i == stray {
				continue
			}
			kind := []string{FaultPartition, FaultPause}[d.IntN(2)]
			out = append(out, Fault{At: f.At - d.dur(0, 100*time.Millisecond), Kind: kind, Node: i, For: away})
		}
		second := []string{FaultRestartEmpty, FaultRestoreOld}[d.IntN(2)]
		return append(out, Fault{At: f.At + d.dur(200*time.Millisecond, away+3*time.Second), Kind: second})
	case FaultRestartSplit:
		restart := Fault{At: f.At, Kind: []string{FaultRestartEmpty, FaultRestartSaved}[d.IntN(2)]}
		split := Fault{At: f.At + d.dur(0, 3*time.Second), Kind: FaultSplitBrain, For: d.dur(time.Second, 2*s.LeaseTTL),
			Reach: 1 + uint(d.IntN(1<<n-2)), Replica: d.IntN(2), Stay: true}
		return []Fault{f, restart, split}
	case FaultSuccessive:
		first := Fault{At: f.At, Kind: FaultFailover, Replica: d.IntN(2), Follow: d.IntN(2) == 0}
		second := Fault{At: f.At + d.dur(time.Second, 15*time.Second), Kind: FaultSplitBrain, For: d.dur(time.Second, 2*s.LeaseTTL),
			Reach: 1 + uint(d.IntN(1<<n-2)), Replica: d.IntN(2), Stay: true}
		if s.Sentinel != nil {
			first.Kind, first.Sentinel = FaultSentinelFailover, d.IntN(s.Sentinel.Count)
			if d.IntN(2) == 0 {
				second.Kind, second.Sentinel = FaultSentinelFailover, d.IntN(s.Sentinel.Count)
			}
		}
		return []Fault{f, first, second}
	case FaultLeaderRestart:
		if s.Sentinel == nil {
			return []Fault{f}
		}
		k := d.IntN(s.Sentinel.Count)
		return []Fault{f, {At: f.At, Kind: FaultSentinelFailover, Sentinel: k},
			{At: f.At + d.dur(400*time.Millisecond, 2500*time.Millisecond), Kind: FaultSentinelAway, Sentinel: k, For: d.dur(time.Second, 6*time.Second)},
			{At: f.At - time.Second, Kind: FaultLossy, Node: k % n, For: 6 * time.Second}}
	}
	return []Fault{f}
}

// deploymentString describes a fault of the kinds above.
func (f Fault) deploymentString() string {
	switch f.Kind {
	case FaultEvictVolatile, FaultEvictAllKeys:
		return fmt.Sprintf(" for %v, a key every %v", f.For, f.Delay)
	case FaultSplitBrain:
		nodes := reachNodes(f.Reach)
		return fmt.Sprintf(": nodes %v stay on the old master for %v", nodes, f.For)
	case FaultInfoNoPerm, FaultInfoRenamed:
		return fmt.Sprintf(" from the start, for %v", f.For)
	case FaultRedisSkew:
		return fmt.Sprintf(": the new master's clock %v behind", f.Delay)
	case FaultRewrite:
		if f.All {
			return ": every key from the last backup"
		}
		return ": 1-3 keys from the last backup"
	}
	return ""
}

// injectDeployment applies a fault of the kinds above.
func (r *run) injectDeployment(f Fault) {
	d, now := r.redis, r.w.now
	switch f.Kind {
	case FaultEvictVolatile, FaultEvictAllKeys:
		policy := "volatile-lru"
		if f.Kind == FaultEvictAllKeys {
			policy = "allkeys-lru"
		}
		srv := d.srv
		srv.SetMaxmemoryPolicy(policy)
		d.evictUntil = max(d.evictUntil, now+f.For)
		var evict func()
		evict = func() {
			if r.w.now >= d.evictUntil || d.srv != srv {
				srv.SetMaxmemoryPolicy("noeviction") // the cache load ended
				return
			}
			srv.Evict(1)
			r.w.at(r.w.now+f.Delay, nil, evict)
		}
		evict()
	case FaultSplitBrain:
		reach := map[int]bool{}
		for i := range r.slots {
			reach[i] = f.Reach&(1<<i) != 0
		}
		d.splitBrain(f, reach)
	case FaultInfoNoPerm, FaultInfoRenamed:
		fault := simredis.InfoNoPerm
		if f.Kind == FaultInfoRenamed {
			fault = simredis.InfoRenamed
		}
		srv := d.srv
		srv.SetInfoFault(fault)
		d.infoFault, d.infoUntil = fault, now+f.For // and every master promoted meanwhile
		r.w.at(now+f.For, nil, func() { srv.SetInfoFault(simredis.InfoOK) })
	case FaultRedisSkew:
		d.skewNext = f.Delay
		d.failover(f)
	case FaultRewrite:
		var from *simredis.Data // the newest backup that holds the fleet
		for i := len(d.backups) - 1; i >= 0 && from == nil; i-- {
			if d.backups[i].Len() > 0 {
				from = d.backups[i]
			}
		}
		if from == nil {
			return
		}
		keys := from.Keys()
		if !f.All {
			var some []string
			for range 1 + r.rewrite.IntN(3) {
				some = append(some, keys[r.rewrite.IntN(len(keys))])
			}
			keys = some
		}
		d.srv.RewriteKeys(from, keys...)
	}
}
