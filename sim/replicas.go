package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Fault kinds of the replicas and the Sentinels, drawn by drawReplicas
// from a stream of their own.
const (
	// A replica's process stops for For (a reboot): its master stops
	// listing it at once; back, it continues with a partial sync (Follow)
	// or a full one.
	FaultReplicaDown = "replica-down"
	// A replica's link to its master is cut for For: the master lists it
	// with the offset it had until repl-timeout; the Sentinels still see
	// it. Back, a partial sync (Follow) or a full one.
	FaultReplicaCut = "replica-cut"
	// A replica acknowledges Delay late for For (another region, a slow
	// disk): WAIT times out when Delay is past it.
	FaultReplicaLag = "replica-lag"
	// A replica starts a full sync: listed, acknowledging nothing until it
	// is done, its data then the master's.
	FaultReplicaResync = "replica-resync"
	// Sentinel faults, in deployments with Sentinels: one Sentinel away
	// (its process stopped) for For; one cut off from the master only (it
	// sees it down while the others do not) for For; node Node cut off
	// from one Sentinel for For; SENTINEL FAILOVER on one (a promotion
	// with no down-after wait, the old master taking writes until a
	// Sentinel turns it into a replica); the master cut off from every
	// Sentinel, from the replicas (but one, Stay) and from the nodes not
	// in Reach, for For.
	FaultSentinelAway      = "sentinel-away"
	FaultSentinelDisagree  = "sentinel-disagree"
	FaultSentinelNodeCut   = "sentinel-node-cut"
	FaultSentinelFailover  = "sentinel-failover"
	FaultSentinelMasterCut = "sentinel-master-cut"
	// Redis's port cut between two zones for For, the Sentinels' port
	// open (a firewall or network ACL change that names Redis's port):
	// the master's zone holds the master, every Sentinel but Sentinel and
	// the nodes in Reach; the other zone holds the replicas, Sentinel and
	// the other nodes. The Sentinels still reach one another (they ask
	// and vote) but share no Redis instance across the cut, so a
	// promotion on one side is not learnt on the other until it heals.
	FaultSentinelZoneCut = "sentinel-zone-cut"
	// A planned restart of the master: SHUTDOWN saves a snapshot, the
	// process starts again from it (a new run_id, nothing lost), and its
	// replicas reconnect with a full sync.
	FaultRestartClean = "redis-restart-clean"
)

// midFault reports whether faults of kind land while a process waits on a
// call (world.atMid): those of the replicas and the Sentinels, which touch
// no process, so that a forced failover lands between a grant's Sentinel
// check and its reply.
func midFault(kind string) bool {
	switch kind {
	case FaultReplicaDown, FaultReplicaCut, FaultReplicaLag, FaultReplicaResync, FaultSentinelAway, FaultSentinelDisagree,
		FaultSentinelNodeCut, FaultSentinelFailover, FaultSentinelMasterCut, FaultSentinelZoneCut:
		return true
	}
	return false
}

// drawReplicas draws the deployment's second replica, its Sentinels and
// the faults of both, from a stream of their own, so every other draw of
// a seed is what it was before: the settings; which replica each
// promotion takes and what the other does; 0-3 replica faults; in half
// the schedules three Sentinels and 0-3 Sentinel faults; and the
// patterns of sentinelPatterns.
func (s *Schedule) drawReplicas(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x2e91))}
	s.ReplicaLag2 = x.dur(10*time.Millisecond, 5*time.Second)
	s.ReplTimeout = x.dur(5*time.Second, 60*time.Second)
	s.ReattachAfter = x.dur(5*time.Second, 60*time.Second)
	s.RTT = x.dur(200*time.Microsecond, 3*time.Millisecond)
	if x.IntN(8) == 0 {
		s.RTT = x.dur(10*time.Millisecond, 90*time.Millisecond) // another region
	}
	sentinel := x.IntN(2) == 0
	if sentinel {
		// down-after from 300 ms to 30 s (Redis's default): half of them
		// up to 5 s, a common setting.
		s.Sentinel = &SentinelConfig{Count: 3, Quorum: 2, DownAfter: x.dur(300*time.Millisecond, 5*time.Second),
			FailoverTimeout: x.dur(5*time.Second, 60*time.Second)}
		if x.IntN(2) == 0 {
			s.Sentinel.DownAfter = x.dur(5*time.Second, 30*time.Second)
		}
		if x.IntN(4) == 0 {
			s.Sentinel.Quorum = 1
		}
		s.MinReplicas = []int{1, 1, 0, 2}[x.IntN(4)]
	} else {
		s.MinReplicas = []int{0, 0, 0, 1, 1, 2}[x.IntN(6)]
	}
	for i := range s.Faults {
		s.Faults[i].Replica, s.Faults[i].Follow, s.Faults[i].Stay = x.IntN(2), x.IntN(3) != 0, x.IntN(3) == 0
	}
	n := len(s.Nodes)
	at := func() time.Duration { return x.dur(time.Second, s.Duration-time.Second) }
	for range x.IntN(4) {
		f := Fault{At: at(), Replica: x.IntN(2), Follow: x.IntN(2) == 0}
		switch x.IntN(4) {
		case 0:
			f.Kind, f.For = FaultReplicaDown, x.dur(time.Second, 60*time.Second)
		case 1:
			f.Kind, f.For = FaultReplicaCut, x.dur(time.Second, 60*time.Second)
		case 2:
			f.Kind, f.For, f.Delay = FaultReplicaLag, x.dur(time.Second, 30*time.Second), x.dur(10*time.Millisecond, time.Second)
		default:
			f.Kind = FaultReplicaResync
		}
		s.Faults = append(s.Faults, f)
	}
	if sentinel {
		for range x.IntN(4) {
			f := Fault{At: at(), Sentinel: x.IntN(s.Sentinel.Count), Node: x.IntN(n)}
			switch x.IntN(5) {
			case 0:
				f.Kind, f.For = FaultSentinelAway, x.dur(time.Second, 60*time.Second)
			case 1:
				f.Kind, f.For = FaultSentinelDisagree, x.dur(time.Second, 30*time.Second)
			case 2:
				f.Kind, f.For = FaultSentinelNodeCut, x.dur(time.Second, 30*time.Second)
			case 3:
				f.Kind, f.Replica, f.Follow = FaultSentinelFailover, x.IntN(2), x.IntN(3) != 0
			default:
				f.Kind, f.For, f.Stay = FaultSentinelMasterCut, x.dur(300*time.Millisecond, 2*s.LeaseTTL), x.IntN(3) == 0
				f.Reach = uint(x.IntN(1 << n))
			}
			s.Faults = append(s.Faults, f)
		}
	}
	s.drawReplicaPatterns(x)
}

// replicaString describes a fault of the kinds above.
func (f Fault) replicaString() string {
	sync := map[bool]string{true: "partial", false: "full"}[f.Follow]
	switch f.Kind {
	case FaultReplicaDown:
		return fmt.Sprintf(" replica %d for %v, then a %s sync", f.Replica, f.For, sync)
	case FaultReplicaCut:
		return fmt.Sprintf(" replica %d's link for %v, then a %s sync", f.Replica, f.For, sync)
	case FaultReplicaLag:
		return fmt.Sprintf(" replica %d +%v for %v", f.Replica, f.Delay, f.For)
	case FaultReplicaResync:
		return fmt.Sprintf(" replica %d", f.Replica)
	case FaultSentinelAway, FaultSentinelDisagree:
		return fmt.Sprintf(" Sentinel %d for %v", f.Sentinel, f.For)
	case FaultSentinelNodeCut:
		return fmt.Sprintf(" node %d from Sentinel %d for %v", f.Node, f.Sentinel, f.For)
	case FaultSentinelFailover:
		return fmt.Sprintf(" on Sentinel %d", f.Sentinel)
	case FaultSentinelMasterCut:
		s := fmt.Sprintf(": for %v, nodes %v still reach it", f.For, reachNodes(f.Reach))
		if f.Stay {
			s += fmt.Sprintf(", replica %d on its side", f.Replica)
		}
		return s
	case FaultSentinelZoneCut:
		if f.Stay {
			return fmt.Sprintf(": for %v, the master with replica %d, nodes %v and the Sentinels but %d, the other replica with Sentinel %d and the other nodes",
				f.For, f.Replica, reachNodes(f.Reach), f.Sentinel, f.Sentinel)
		}
		return fmt.Sprintf(": for %v, the master with nodes %v and the Sentinels but %d, the replicas with Sentinel %d and the other nodes",
			f.For, reachNodes(f.Reach), f.Sentinel, f.Sentinel)
	}
	return ""
}

// promotionString describes what a promotion takes (non-Sentinel
// deployments: the Sentinels choose their own).
func (f Fault) promotionString() string {
	other := "stays detached"
	switch {
	case f.Kind == FaultSplitBrain && f.Stay:
		other = "stays with the old master"
	case f.Follow:
		other = "follows it"
	}
	return fmt.Sprintf(" (without Sentinels: replica %d; the other %s)", f.Replica, other)
}

func reachNodes(mask uint) []int {
	var nodes []int
	for i := range 8 {
		if mask&(1<<i) != 0 {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

// injectReplicas applies a fault of the kinds above, and the Redis faults
// whose meaning the Sentinels change.
func (r *run) injectReplicas(f Fault) {
	d, now := r.redis, r.w.now
	reps := d.replicas()
	h := reps[f.Replica%len(reps)]
	switch f.Kind {
	case FaultReplicaDown:
		was := h.follows
		d.detach(h, false)
		d.down(h, now+f.For)
		gen := h.gen
		r.w.atMid(now+f.For, func() {
			h.runID = d.newID()
			if h.gen != gen || h == d.m {
				return
			}
			to := d.srv // it follows its master again, if that one still runs
			if was != nil && d.live(was) {
				to = was
			}
			d.attach(h, to, !f.Follow || to != was)
		})
	case FaultReplicaCut:
		if h.follows == nil || h.cutUntil > now {
			return
		}
		h.cutAt, h.cutUntil = now, now+f.For
		srv, gen := h.follows, h.gen
		r.w.atMid(now+f.For, func() {
			if h.gen == gen && h.follows == srv && h != d.m {
				d.attach(h, srv, !f.Follow)
			}
		})
	case FaultReplicaLag:
		h.lag, h.lagUntil = f.Delay, now+f.For
	case FaultReplicaResync:
		if h.follows != nil && d.live(h.follows) {
			d.attach(h, h.follows, true)
		}
	}
	ss := d.sentinels
	if ss == nil {
		return
	}
	s := ss.all[f.Sentinel%len(ss.all)]
	switch f.Kind {
	case FaultSentinelAway:
		s.awayUntil = max(s.awayUntil, now+f.For)
	case FaultSentinelDisagree:
		s.masterCut[d.m.i] = max(s.masterCut[d.m.i], now+f.For)
	case FaultSentinelNodeCut:
		if f.Node < len(r.slots) {
			r.slots[f.Node].sentinelCut[s.i] = max(r.slots[f.Node].sentinelCut[s.i], now+f.For)
		}
	case FaultSentinelFailover:
		ss.forceFailover(s)
	case FaultSentinelMasterCut:
		r.masterCut(f, f.Reach)
	case FaultSentinelZoneCut:
		r.zoneCut(f, s)
	}
}

// zoneCut cuts Redis's port between the master's zone (the master,
// replica f.Replica when f.Stay, the Sentinels but lone, the nodes in
// f.Reach) and the other one (the other hosts, lone, the other nodes)
// for f.For: the links to the master of the replicas in the other zone
// are cut and connect again (a partial sync) when it heals, unless a
// promotion re-pointed them meanwhile.
func (r *run) zoneCut(f Fault, lone *sentinel) {
	d, now := r.redis, r.w.now
	end := now + f.For
	m := d.m
	m.replCut = max(m.replCut, end)
	lone.masterCut[m.i] = max(lone.masterCut[m.i], end)
	reps := d.replicas()
	for k, h := range reps {
		if f.Stay && k == f.Replica%len(reps) { // beside the master
			h.sideOf, h.sideUntil = m, end
			lone.masterCut[h.i] = max(lone.masterCut[h.i], end)
			for i := range r.slots {
				if f.Reach&(1<<i) == 0 {
					h.nodeCut[i] = max(h.nodeCut[i], end)
				}
			}
			continue
		}
		for _, s := range d.sentinels.all {
			if s != lone {
				s.masterCut[h.i] = max(s.masterCut[h.i], end)
			}
		}
		for i := range r.slots {
			if f.Reach&(1<<i) != 0 {
				h.nodeCut[i] = max(h.nodeCut[i], end)
			}
		}
		if h.follows == d.srv && h.cutUntil <= now {
			h.cutAt, h.cutUntil = now, end
			srv, gen := h.follows, h.gen
			r.w.atMid(end, func() {
				if h.gen == gen && h.follows == srv && h != d.m {
					d.attach(h, srv, false)
				}
			})
		}
	}
	for i := range r.slots {
		if f.Reach&(1<<i) == 0 {
			m.nodeCut[i] = max(m.nodeCut[i], end)
		}
	}
}

// masterCut cuts the master off from every Sentinel, from the nodes not
// in reach and from the replicas but one when f.Stay, for f.For: the
// Sentinels promote a replica if it lasts past their down-after and
// election, and the nodes in reach write to the old master meanwhile.
func (r *run) masterCut(f Fault, reach uint) {
	d, now := r.redis, r.w.now
	end := now + f.For
	m := d.m
	m.sentinelCut, m.replCut = max(m.sentinelCut, end), max(m.replCut, end)
	for i := range r.slots {
		if reach&(1<<i) == 0 {
			m.nodeCut[i] = max(m.nodeCut[i], end)
		}
	}
	reps := d.replicas()
	for k, h := range reps {
		if f.Stay && k == f.Replica%len(reps) {
			h.sentinelCut = max(h.sentinelCut, end) // on the master's side
			h.sideOf, h.sideUntil = m, end
			continue
		}
		if h.follows == d.srv && h.cutUntil <= now {
			h.cutAt, h.cutUntil = now, end
			srv, gen := h.follows, h.gen
			r.w.atMid(end, func() {
				if h.gen == gen && h.follows == srv && h != d.m {
					d.attach(h, srv, false) // the partition healed before a promotion
				}
			})
		}
	}
}

// injectSentinelRedis applies, with Sentinels, the Redis faults whose
// failover the Sentinels decide: a failover is the master's process
// stopping (back after the Sentinels' down-after and a few seconds, or
// 1-20 s), a split brain is the master cut off, and a failover to a
// skewed server sets the next promoted replica's clock behind. It reports
// whether it handled f.
func (r *run) injectSentinelRedis(f Fault) bool {
	d, now := r.redis, r.w.now
	switch f.Kind {
	case FaultFailover, FaultRedisSkew:
		if f.Kind == FaultRedisSkew {
			d.skewNext = f.Delay
		}
		m := d.m
		back := now + d.s.Sentinel.DownAfter + time.Second + time.Duration(d.rng.Int64N(int64(20*time.Second)))
		d.down(m, back)
		r.w.atMid(back, func() {
			if d.m == m { // no promotion: it restarts from its last snapshot
				d.restart(d.saved)
			}
		})
		return true
	case FaultSplitBrain:
		r.masterCut(f, f.Reach)
		return true
	}
	return false
}

// Patterns of Sentinel schedules, each drawn with probability 1 in 6.
const (
	// A forced failover while the master answers 1-4 s late, so grants in
	// flight when it lands run on the old master after the promotion,
	// their Sentinel check answered before it; meanwhile
	// a node subscribed to the Sentinel that fails over loses requests and
	// replies, so it dials again and reaches the promoted replica as soon
	// as that Sentinel names it, while the others still write to the old
	// master.
	PatternFailoverInFlight = "failover-in-flight"
	// A Sentinel cut off from the master for down-after and a few seconds
	// (with quorum 1 it fails over alone while the others see the master
	// up), and a node restarting once it may have.
	PatternLoneFailover = "lone-failover"
)

// PatternCleanRestartSplit, a pattern of every schedule (1 in 6): a
// planned restart of the master within the first 20 s, then, within 3 s
// while its replicas reconnect, a split brain with one replica on the
// old master's side. The mark kept across the restart is what stops the
// old master's grants: that replica alone is fewer than it.
const PatternCleanRestartSplit = "clean-restart-then-split"

// drawCleanRestartSplit adds PatternCleanRestartSplit, from a stream of its
// own.
func (s *Schedule) drawCleanRestartSplit(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0xc1ea))}
	n := len(s.Nodes)
	if x.IntN(6) != 0 {
		return
	}
	at := x.dur(2*time.Second, 20*time.Second)
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultRestartClean},
		Fault{At: at + x.dur(0, 3*time.Second), Kind: FaultSplitBrain, For: x.dur(time.Second, 2*s.LeaseTTL),
			Reach: 1 + uint(x.IntN(1<<n-2)), Replica: x.IntN(2), Stay: true})
}

// PatternFailoverSplit, a pattern of schedules without Sentinels (1 in
// 6): a failover after which the other replica follows none, then within
// a second, before the old master is back, a split brain that promotes
// that replica while the first promoted one keeps the writes of some
// nodes. The mark after the first promotion (one less, never below one
// while the mark was two) is what stops the first promoted one's grants:
// it has no replica to acknowledge them.
const PatternFailoverSplit = "failover-then-split"

// drawFailoverSplit adds PatternFailoverSplit, from a stream of its own.
func (s *Schedule) drawFailoverSplit(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0xf05b))}
	n := len(s.Nodes)
	if s.Sentinel != nil || x.IntN(6) != 0 {
		return
	}
	at := x.dur(2*time.Second, s.Duration-10*time.Second)
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultFailover, Replica: x.IntN(2), pattern: PatternFailoverSplit},
		Fault{At: at + x.dur(200*time.Millisecond, time.Second), Kind: FaultSplitBrain, For: x.dur(time.Second, 2*s.LeaseTTL),
			Reach: 1 + uint(x.IntN(1<<n-2)), pattern: PatternFailoverSplit})
}

// PatternEmptyRestartSplit, a pattern of schedules with --min-replicas
// (1 in 6): the master restarts with nothing (its {ns}:meta and mark
// gone) and within a second, before its replicas reconnect, is cut off
// from both while some nodes still reach it and a replica is promoted.
// The mark starts again from the replicas listed, none yet: the floor is
// what stops the old master's grants.
const PatternEmptyRestartSplit = "empty-restart-then-split"

// drawEmptyRestartSplit adds PatternEmptyRestartSplit, from a stream of
// its own.
func (s *Schedule) drawEmptyRestartSplit(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0xe3b7))}
	n := len(s.Nodes)
	if s.MinReplicas == 0 || x.IntN(6) != 0 {
		return
	}
	at := x.dur(2*time.Second, s.Duration-10*time.Second)
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultRestartEmpty},
		Fault{At: at + x.dur(0, time.Second), Kind: FaultSplitBrain, For: x.dur(time.Second, 2*s.LeaseTTL),
			Reach: 1 + uint(x.IntN(1<<n-2)), Replica: x.IntN(2)})
}

// drawReplicaPatterns adds the patterns a schedule with Sentinels draws.
func (s *Schedule) drawReplicaPatterns(x drawer) {
	n := len(s.Nodes)
	if s.Sentinel == nil {
		return
	}
	restart := func(at time.Duration) Fault {
		return Fault{At: at, Kind: FaultCrash, Node: x.IntN(n), For: x.dur(0, 100*time.Millisecond), State: StateKept}
	}
	for _, p := range []string{PatternFailoverInFlight, PatternLoneFailover} {
		if x.IntN(6) != 0 {
			continue
		}
		at := x.dur(2*time.Second, s.Duration-10*time.Second)
		switch p {
		case PatternFailoverInFlight:
			k := x.IntN(s.Sentinel.Count)
			d := x.dur(2*time.Second, 10*time.Second)
			s.Faults = append(s.Faults,
				Fault{At: at, Kind: FaultRedisSlow, For: d, Delay: x.dur(time.Second, 4*time.Second)},
				Fault{At: at, Kind: FaultLossy, Node: k % n, For: d + 3*time.Second},
				Fault{At: at + x.dur(0, d), Kind: FaultSentinelFailover, Sentinel: k})
		case PatternLoneFailover:
			cut := Fault{At: at, Kind: FaultSentinelDisagree, Sentinel: x.IntN(s.Sentinel.Count), For: s.Sentinel.DownAfter + x.dur(2*time.Second, 10*time.Second)}
			s.Faults = append(s.Faults, cut, restart(at+s.Sentinel.DownAfter+x.dur(time.Second, 3*time.Second)))
		}
	}
}

// PatternRebootSplit, a pattern of schedules with Sentinels (1 in 6). The
// real sequence: the master's host reboots in the first 15 s (its process
// down), and the Sentinels promote a replica, which the other follows;
// 2.5-5 s after they may have, a network partition cuts the new master,
// the other replica and some nodes off from the Sentinels and from the
// rest (those nodes reach the new master, no Sentinel), and the rebooted
// host comes back on the Sentinels' side within half a down-after: it
// cannot reach the new master, and the Sentinels promote it. The new
// master's mark is one (one less after its promotion, only the other
// replica listed since), so its grants to the nodes on its side,
// acknowledged by that replica alone, are missing from the rebooted host:
// what stops them is that a grant the Sentinels do not vouch for waits
// for every replica they know.
const PatternRebootSplit = "reboot-then-split"

// drawRebootSplit adds PatternRebootSplit, from a stream of its own.
func (s *Schedule) drawRebootSplit(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x4eb0))}
	c, n := s.Sentinel, len(s.Nodes)
	if c == nil || x.IntN(6) != 0 {
		return
	}
	at := x.dur(2*time.Second, 15*time.Second)
	cut := at + c.DownAfter + x.dur(2500*time.Millisecond, 5*time.Second)
	back := cut + x.dur(0, c.DownAfter/2)
	reach := 1 + uint(x.IntN(1<<n-2))
	dur := c.DownAfter + x.dur(3*time.Second, 2*s.LeaseTTL)
	// Replica 1 on the new master's side: of the hosts other than the new
	// master, the one that is not the first host, rebooted (the master
	// until then in all but the schedules that promoted a replica sooner).
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultRedisDown, For: back - at},
		Fault{At: cut, Kind: FaultSentinelMasterCut, For: dur, Reach: reach, Replica: 1, Stay: true})
	for i := range n {
		if reach&(1<<i) == 0 {
			continue
		}
		for k := range c.Count {
			s.Faults = append(s.Faults, Fault{At: cut, Kind: FaultSentinelNodeCut, Node: i, Sentinel: k, For: dur})
		}
	}
}

// PatternRackRestartSplit, a pattern of schedules without Sentinels and
// with --min-replicas (1 in 6). The real sequence: the rack that holds the
// master and some nodes loses power; it comes back with the master's host
// empty (no persistence) and its uplink down, so the replicas, in other
// racks, cannot reach it, and the operator's failover script promotes one
// (the other follows it or none); the rack's nodes, restarted within a
// second from their state files, reach only the old master, the others
// only the promoted replica. The rack's nodes are new processes that never
// used a grant, so the registry they restore on the old master has the
// mark of the replicas it lists, none (a running node would restore the
// mark of its last grant): what stops the old master's grants is
// --min-replicas above the mark. No replica stays on the rack's side: one
// there would meet --min-replicas 1 while the other is promoted (the
// uncovered restart-then-split window). Through Sentinel a grant they do
// not vouch for also waits for every replica they know, which stops these
// grants whatever --min-replicas says: hence schedules without them.
const PatternRackRestartSplit = "rack-restart-then-split"

// drawRackRestartSplit adds PatternRackRestartSplit, from a stream of its
// own.
func (s *Schedule) drawRackRestartSplit(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0xa11e))}
	n := len(s.Nodes)
	if x.IntN(6) != 0 || s.Sentinel != nil || s.MinReplicas == 0 {
		return
	}
	at := x.dur(2*time.Second, s.Duration-10*time.Second)
	reach := 1 + uint(x.IntN(1<<n-2))
	for i := range n {
		if reach&(1<<i) != 0 {
			down := x.dur(0, 100*time.Millisecond) // before the master restarts; back after it
			s.Faults = append(s.Faults, Fault{At: at - down, Kind: FaultCrash, Node: i, For: down + x.dur(0, time.Second), State: StateKept})
		}
	}
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultRestartEmpty},
		Fault{At: at, Kind: FaultSplitBrain, For: x.dur(3*time.Second, 2*s.LeaseTTL), Reach: reach, Replica: x.IntN(2), Follow: x.IntN(2) == 0})
}

// PatternInfoRestartFailover, a pattern of schedules without Sentinels
// whose INFO is unreadable (redis-info-noperm, redis-info-renamed; 1 in
// 2). The real sequence: the rack that holds the master and every node
// loses power; the master's host comes back empty (no persistence) and
// every node within a second as a new process from its state file; 1-4 s
// later the master's host fails again (the power not yet steady) and the
// operator promotes a replica, which the grants made since the restart
// may not have reached. With INFO unreadable guard.lua refuses every write,
// so nothing is granted; read as an identity that never changes (the
// identity-silent tooth), the registry is restored by a process that
// never used a grant with the mark of the replicas INFO lists, none, the
// grants wait for no replica (without --min-replicas), and the promotion
// that lost the last of them is not seen as a loss. Every node restarts:
// a running one would restore the mark of its last grant.
const PatternInfoRestartFailover = "info-restart-then-failover"

// drawInfoRestartFailover adds PatternInfoRestartFailover, from a stream
// of its own.
func (s *Schedule) drawInfoRestartFailover(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x1f0f))}
	info := slices.ContainsFunc(s.Faults, func(f Fault) bool { return f.Kind == FaultInfoNoPerm || f.Kind == FaultInfoRenamed })
	if x.IntN(2) != 0 || s.Sentinel != nil || !info {
		return
	}
	at := x.dur(2*time.Second, s.Duration-20*time.Second)
	for i := range s.Nodes {
		down := x.dur(0, 100*time.Millisecond) // before the master restarts; back after it
		s.Faults = append(s.Faults, Fault{At: at - down, Kind: FaultCrash, Node: i, For: down + x.dur(0, time.Second), State: StateKept})
	}
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultRestartEmpty},
		Fault{At: at + x.dur(time.Second, 4*time.Second), Kind: FaultFailover, Replica: x.IntN(2), Follow: x.IntN(2) == 0})
}

// PatternSplitRestartSplit, a pattern of schedules without Sentinels and
// with --min-replicas (1 in 6): a split brain whose promoted replica P
// the other replica follows; a planned restart of P 3-20 s later; within
// 3 s, while P's replicas reconnect, a second split brain with some nodes
// still on P, the old master back as P's replica and staying with it, and
// the other replica promoted. P lists the two replicas in turns, never
// together (the other before the restart, the old master after it):
// counted at once its mark stays one, and a grant the old master alone
// acknowledged is missing from the replica promoted. Counted by address
// (replicas.lua's replica set) the mark is two and P's grants are
// refused. Only in schedules that promote nothing and lose nothing before
// its second split (below). With --min-replicas 0 a master that lost
// {ns}:meta meanwhile (its set with it) opens a window no count closes
// (docs/guarantees.md, what it does not cover): hence schedules with it.
const PatternSplitRestartSplit = "split-restart-split"

// drawSplitRestartSplit adds PatternSplitRestartSplit, from a stream of
// its own.
func (s *Schedule) drawSplitRestartSplit(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x5b15))}
	n := len(s.Nodes)
	if x.IntN(6) != 0 || s.Sentinel != nil || s.MinReplicas == 0 {
		return
	}
	at := x.dur(2*time.Second, s.Duration/2)
	restart := at + x.dur(3*time.Second, 20*time.Second)
	first := Fault{At: at, Kind: FaultSplitBrain, For: x.dur(restart-at, 2*(restart-at)+s.LeaseTTL), Reach: 1 + uint(x.IntN(1<<n-2)),
		Replica: x.IntN(2), Follow: true, pattern: PatternSplitRestartSplit}
	second := Fault{At: restart + x.dur(0, 3*time.Second), Kind: FaultSplitBrain, For: x.dur(time.Second, 2*s.LeaseTTL),
		Reach: 1 + uint(x.IntN(1<<n-2)), Replica: x.IntN(2), Stay: true, pattern: PatternSplitRestartSplit}
	// The schedule's own promotions and losses of {ns}:meta up to the
	// second split would make it another sequence: one whose second
	// promotion takes a replica that never followed P (the double
	// failover docs/guarantees.md leaves open without Sentinel), or whose
	// registry lost the replicas it counted.
	if slices.ContainsFunc(s.Faults, func(f Fault) bool {
		return f.At <= second.At && slices.Contains([]string{FaultSplitBrain, FaultFailover, FaultRestartEmpty, FaultRestoreOld, FaultRestartSaved}, f.Kind)
	}) {
		return
	}
	s.Faults = append(s.Faults, first, Fault{At: restart, Kind: FaultRestartClean, pattern: PatternSplitRestartSplit}, second)
}

// PatternZoneCut, a pattern of schedules with Sentinels (1 in 6). The
// real sequence: a firewall or network ACL change drops Redis's port
// between two zones for longer than a lease while the Sentinels' port
// stays open. The master, two Sentinels and some nodes are in one zone;
// both replicas, the third Sentinel and the other nodes (among them one
// that asks that Sentinel first, as the nodes of a zone ask its own
// Sentinel) in the other. That Sentinel sees the master down while the
// two beside it see it up: with quorum 1 (half of those schedules) it
// fails over alone once down-after passed, the two voting for it as a
// Sentinel votes whatever it sees; otherwise the operator, paged by the
// failing nodes of the replicas' zone, runs SENTINEL FAILOVER on it 2-20
// s after the cut (the Sentinel of the failing nodes' zone). The
// promoted replica takes the writes of the nodes that dial it through
// that Sentinel. The two beside the old master share no Redis instance
// with it, so they learn nothing of the promotion until the cut heals,
// and meanwhile the old master takes the writes of the nodes beside it,
// which take over the machine IDs whose leases expire there. Every check
// of those nodes finds two Sentinels of three naming the old master up:
// what refuses their grants is the third (the rule asks every Sentinel,
// not a majority) flagging it down or failover_in_progress, or naming the
// promoted replica once it switched. In one in two, one replica is in
// the master's zone: that Sentinel's failover, which waits for every
// replica it has not seen down, stays in progress, naming the old master,
// until down-after has passed since the cut.
const PatternZoneCut = "zone-cut-failover"

// drawZoneCut adds PatternZoneCut, from a stream of its own.
func (s *Schedule) drawZoneCut(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x2c07))}
	c, n := s.Sentinel, len(s.Nodes)
	if c == nil || x.IntN(6) != 0 {
		return
	}
	k := x.IntN(c.Count)
	// The nodes beside the master: some, never node k, which asks
	// Sentinel k first (run.route).
	reach := uint(x.IntN(1<<n-1)) &^ (1 << k)
	if reach == 0 {
		reach = 1 << ((k + 1) % n)
	}
	forced := c.Quorum > 1 || x.IntN(2) == 0
	promoted := c.DownAfter + time.Second // the lone Sentinel's failover
	if forced {
		promoted = x.dur(2*time.Second, 20*time.Second) // the operator's
	}
	cutFor := promoted + x.dur(s.LeaseTTL, 2*s.LeaseTTL)
	at := x.dur(2*time.Second, max(2*time.Second, s.Duration-cutFor-5*time.Second))
	// One in two leaves a replica beside the master: the lone Sentinel's
	// failover stays in progress until it sees that one down, down-after
	// after the cut.
	stay, replica := x.IntN(2) == 0, x.IntN(2)
	s.Faults = append(s.Faults, Fault{At: at, Kind: FaultSentinelZoneCut, Sentinel: k, Reach: reach, For: cutFor, Stay: stay, Replica: replica,
		pattern: PatternZoneCut})
	if forced {
		s.Faults = append(s.Faults, Fault{At: at + promoted, Kind: FaultSentinelFailover, Sentinel: k, pattern: PatternZoneCut})
	}
}
