package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/node"
)

// Schedule is one simulated run: the fleet's settings and the faults to
// inject, drawn from a seed (NewSchedule). The workload (which node issues
// how many IDs when) comes from the seed too, from a stream of its own, so
// a schedule with some faults removed (Shrink) keeps its workload.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Nodes    []NodeConfig
	// The layout: small machine spaces make takeovers frequent.
	BitsSequence, BitsMachineID int
	// BitsID is the ID's width (63, or 53..62 as for JavaScript); with
	// BitsRegion 1 the fleet is region Region's, leasing only the machine
	// IDs of its half, with its own counter machine ID.
	BitsID, BitsRegion, Region int
	LeaseTTL                   time.Duration
	MaxSkew                    time.Duration
	// Timer slack of every process: timers shorter than this fire late.
	Slack time.Duration
	// ReplicaLag is how often the replica catches up with the master; a
	// failover loses what was written since.
	ReplicaLag time.Duration
	// SaveEvery is how often Redis writes a snapshot (RDB, or an AOF
	// fsynced every second): a restart loads the last one.
	SaveEvery time.Duration
	Faults    []Fault
	// Exposure names the uncovered fault kind forced into the schedule
	// (WithExposure), or "".
	Exposure string
	// The deployment's second replica and Sentinels (drawReplicas, a
	// stream of its own): how often the second replica catches up; how
	// long a master lists a replica whose link was cut (repl-timeout);
	// how long a replica left following no master (or another) stays so
	// before it is pointed at the master (Sentinel's failover-timeout, an
	// operator); a round trip between a node and Redis or a Sentinel; the
	// nodes' --min-replicas; the Sentinels, nil for none.
	ReplicaLag2   time.Duration
	ReplTimeout   time.Duration
	ReattachAfter time.Duration
	RTT           time.Duration
	MinReplicas   int
	Sentinel      *SentinelConfig
}

// SentinelConfig is the Sentinels of a deployment: how many, the quorum,
// down-after-milliseconds and failover-timeout.
type SentinelConfig struct {
	Count, Quorum              int
	DownAfter, FailoverTimeout time.Duration
}

// NodeConfig is one node's settings.
type NodeConfig struct {
	Mode          node.Mode // flake, counter or auto
	MachineIDs    int
	MaxLead       time.Duration
	ReserveAhead  time.Duration
	CheckInterval time.Duration
	RetryInterval time.Duration
	RecoverAfter  time.Duration
	MinSegment    int
	MaxSegment    int
	CounterLead   time.Duration
}

// Fault kinds.
const (
	// Redis.
	FaultFailover     = "redis-failover"      // promote the replica: writes since it last caught up are lost
	FaultRestartSaved = "redis-restart-saved" // restart from the last snapshot
	FaultRestartEmpty = "redis-restart-empty" // restart without data
	FaultRestoreOld   = "redis-restore-old"   // restart from an old backup
	FaultRedisDown    = "redis-down"          // refuses connections for For
	FaultRedisSlow    = "redis-slow"          // the master answers every call Delay later, for For
	// Network of one node.
	FaultPartition = "net-partition" // the node cannot reach Redis for For
	FaultDelay     = "net-delay"     // the node's calls take Delay each way, for For
	FaultLossy     = "net-lossy"     // the node's requests or replies are lost (1 in 3), for For
	// Processes.
	FaultPause = "proc-pause" // the node stops for For (GC, SIGSTOP, a VM migration)
	FaultCrash = "proc-crash" // kill -9; restarted after For with State
	FaultStop  = "proc-stop"  // clean shutdown; restarted after For with State
	// Clocks.
	FaultClockStep = "clock-step" // the node's wall clock steps by Delay while it runs
	// Disks.
	FaultDiskFull = "disk-full" // the node's state file cannot be written, for For
)

// Restart variants of a node's state file.
const (
	StateKept   = "kept"   // as the process left it
	StateNone   = "none"   // deleted (a new disk)
	StateCopy   = "copy"   // a copy of another node's (a cloned VM or volume)
	StateBackup = "backup" // an old backup of its own
)

// Fault is one injected fault.
type Fault struct {
	At    time.Duration
	Kind  string
	Node  int           // the node, for node faults
	For   time.Duration // how long it lasts (or the downtime of a restart)
	Delay time.Duration // a delay, or a clock step (may be negative)
	State string        // restart: what the state file is
	From  int           // restart with StateCopy: whose state file
	Back  time.Duration // restart: the clock is set back this much
	// Layout: the restart runs with one sequence bit moved to the machine
	// ID (a misconfigured deploy on a new machine): the same time bits,
	// so its IDs would collide with the fleet's were it let in.
	Layout bool
	// Reach: the nodes (a bit each) that stay on the old master in a split
	// brain. All: a rewrite takes every key.
	Reach uint
	All   bool
	// Replica: the replica a promotion or a replica fault takes (0: the
	// one with the most data, 1: the other). Follow: after a promotion the
	// other replica follows the promoted one (after a replica's outage: it
	// continues with a partial sync); Stay: it stays with the old master
	// (a split brain: on the old master's side). Sentinel: the Sentinel a
	// Sentinel fault takes.
	Replica      int
	Follow, Stay bool
	Sentinel     int
	// pattern names the replica pattern that drew it, if one did.
	pattern string
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9s %s", f.At.Round(time.Millisecond), f.Kind)
	switch f.Kind {
	case FaultRestartSaved, FaultRestartEmpty, FaultRestoreOld, FaultStrayAfterLoss, FaultRestartClean:
	case FaultFailover:
		b.WriteString(f.promotionString())
	case FaultEvictVolatile, FaultEvictAllKeys, FaultSplitBrain, FaultInfoNoPerm, FaultInfoRenamed, FaultRedisSkew, FaultRewrite:
		b.WriteString(f.deploymentString())
		if f.Kind == FaultSplitBrain || f.Kind == FaultRedisSkew {
			b.WriteString(f.promotionString())
		}
	case FaultReplicaDown, FaultReplicaCut, FaultReplicaLag, FaultReplicaResync, FaultSentinelAway, FaultSentinelDisagree,
		FaultSentinelNodeCut, FaultSentinelFailover, FaultSentinelMasterCut, FaultSentinelZoneCut:
		b.WriteString(f.replicaString())
	case FaultRedisDown:
		fmt.Fprintf(&b, " for %v", f.For)
	case FaultRedisSlow:
		fmt.Fprintf(&b, " +%v for %v", f.Delay, f.For)
	default:
		fmt.Fprintf(&b, " node %d", f.Node)
		switch f.Kind {
		case FaultDelay:
			fmt.Fprintf(&b, " +%v for %v", f.Delay, f.For)
		case FaultClockStep:
			fmt.Fprintf(&b, " by %v", f.Delay)
		case FaultCrash, FaultStop:
			fmt.Fprintf(&b, ", back after %v with state file %s", f.For, f.State)
			if f.State == StateCopy {
				fmt.Fprintf(&b, " of node %d", f.From)
			}
			if f.Back > 0 {
				fmt.Fprintf(&b, ", clock set back %v", f.Back)
			}
			if f.Layout {
				b.WriteString(", with another layout")
			}
		default:
			fmt.Fprintf(&b, " for %v", f.For)
		}
	}
	return b.String()
}

// NewSchedule draws a schedule from seed.
func NewSchedule(seed uint64) Schedule {
	d := drawer{rand.New(rand.NewPCG(seed, 0x5eed))}
	s := Schedule{
		Seed:          seed,
		Duration:      d.dur(45*time.Second, 2*time.Minute),
		BitsSequence:  2 + d.IntN(4),
		BitsMachineID: 2 + d.IntN(2),
		LeaseTTL:      d.dur(10*time.Second, 30*time.Second),
		MaxSkew:       d.dur(100*time.Millisecond, time.Second),
		Slack:         d.dur(20*time.Millisecond, 500*time.Millisecond),
		ReplicaLag:    d.dur(10*time.Millisecond, 5*time.Second),
		SaveEvery:     d.dur(time.Second, 60*time.Second),
	}
	s.Nodes = d.nodes()
	ahead := s.Nodes[0].ReserveAhead
	s.drawShape(seed)
	for range 3 + d.IntN(12) {
		f := d.fault(s)
		s.Faults = append(s.Faults, f)
		s.Faults = append(s.Faults, d.adversary(s, f, ahead)...)
	}
	s.drawDeployment(seed)
	s.drawPatterns(seed)
	s.drawReplicas(seed)
	s.drawCleanRestartSplit(seed)
	s.drawFailoverSplit(seed)
	s.drawEmptyRestartSplit(seed)
	s.drawRebootSplit(seed)
	s.drawRackRestartSplit(seed)
	s.drawInfoRestartFailover(seed)
	s.drawSplitRestartSplit(seed)
	s.drawZoneCut(seed)
	sortFaults(s.Faults)
	return s
}

// drawer draws a schedule's parts, in an order that is part of what a
// seed means (RELIABILITY.md names seeds): add draws only at the end of a
// part's, or every seed changes.
type drawer struct{ *rand.Rand }

func (d drawer) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(d.Int64N(int64(hi-lo)+1))
}

// nodes draws 3-5 nodes. How far ahead of the clock nodes reach is the
// same across the fleet, as the README asks: after Redis lost everything,
// nodes with different reaches can collide (a documented limit, not a bug
// to hunt).
func (d drawer) nodes() []NodeConfig {
	modes := []node.Mode{node.ModeFlake, node.ModeFlake, node.ModeAuto, node.ModeAuto, node.ModeCounter}
	maxLead, ahead, counterLead := d.dur(0, time.Second), d.dur(2*time.Second, 10*time.Second), d.dur(0, time.Second)
	var nodes []NodeConfig
	for range 3 + d.IntN(3) {
		minSeg := 128 + d.IntN(385)
		nodes = append(nodes, NodeConfig{
			Mode:          modes[d.IntN(len(modes))],
			MachineIDs:    1 + d.IntN(2),
			MaxLead:       maxLead,
			ReserveAhead:  ahead,
			CheckInterval: d.dur(100*time.Millisecond, time.Second),
			RetryInterval: d.dur(time.Second, 5*time.Second),
			RecoverAfter:  d.dur(0, 5*time.Second),
			MinSegment:    minSeg,
			MaxSegment:    minSeg + d.IntN(256),
			CounterLead:   counterLead,
		})
	}
	return nodes
}

// drawShape draws the ID's width and the region from a stream of its own,
// so that every other field of a seed's schedule is what it was before
// widths and regions were drawn. A region takes one more machine bit, so
// a region's fleet has as many machine IDs as a fleet without regions.
func (s *Schedule) drawShape(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x1a7e))}
	s.BitsID = 63
	if x.IntN(4) == 0 {
		s.BitsID = 53 + x.IntN(10)
	}
	if x.IntN(4) == 0 {
		s.BitsRegion, s.Region = 1, x.IntN(2)
		s.BitsMachineID++
	}
}

// Layout is the fleet's layout: 10 ms ticks from epoch.
func (s Schedule) Layout() (flake.Layout, error) {
	return flake.Settings{BitsID: s.BitsID, BitsSequence: s.BitsSequence, BitsMachineID: s.BitsMachineID,
		TimeUnit: 10 * time.Millisecond, StartTime: epoch, BitsRegion: s.BitsRegion, Region: s.Region}.Layout()
}

// fault draws one fault of s.
func (d drawer) fault(s Schedule) Fault {
	n := len(s.Nodes)
	f := Fault{At: d.dur(time.Second, s.Duration-time.Second), Node: d.IntN(n)}
	switch k := d.IntN(100); {
	case k < 8:
		f.Kind = FaultFailover
	case k < 13:
		f.Kind = FaultRestartSaved
	case k < 16:
		f.Kind = FaultRestartEmpty
	case k < 19:
		f.Kind = FaultRestoreOld
	case k < 24:
		f.Kind, f.For = FaultRedisDown, d.dur(100*time.Millisecond, 3*s.LeaseTTL)
	case k < 28:
		f.Kind, f.For, f.Delay = FaultRedisSlow, d.dur(time.Second, 10*time.Second), d.dur(time.Millisecond, s.LeaseTTL/2)
	case k < 36:
		f.Kind, f.For = FaultPartition, d.dur(100*time.Millisecond, 3*s.LeaseTTL)
	case k < 42:
		f.Kind, f.For, f.Delay = FaultDelay, d.dur(time.Second, 10*time.Second), d.dur(time.Millisecond, s.LeaseTTL)
	case k < 48:
		f.Kind, f.For = FaultLossy, d.dur(time.Second, 10*time.Second)
	case k < 60:
		f.Kind, f.For = FaultPause, d.dur(10*time.Millisecond, 4*s.LeaseTTL)
	case k < 76:
		f.Kind = []string{FaultCrash, FaultStop}[d.IntN(2)]
		f.For = d.dur(0, 3*s.LeaseTTL)
		if d.IntN(3) == 0 {
			f.For = d.dur(0, 200*time.Millisecond) // a supervisor restarts it at once
		}
		f.State = []string{StateKept, StateKept, StateNone, StateCopy, StateBackup}[d.IntN(5)]
		f.From = (f.Node + 1 + d.IntN(n-1)) % n
		if d.IntN(4) == 0 {
			f.Back = d.dur(time.Millisecond, 2*s.MaxSkew)
		}
		if s.BitsSequence > 1 && d.IntN(3) == 0 {
			f.Layout, f.State = true, StateNone
		}
	case k < 92:
		f.Kind, f.Delay = FaultClockStep, d.dur(-3*s.MaxSkew, 3*s.MaxSkew)
	default:
		f.Kind, f.For = FaultDiskFull, d.dur(time.Second, 20*time.Second)
	}
	return f
}

// adversary draws the faults an adversary would add to f: the patterns
// random draws rarely line up.
func (d drawer) adversary(s Schedule, f Fault, ahead time.Duration) []Fault {
	var out []Fault
	if f.Kind == FaultPause && f.For > s.LeaseTTL && d.IntN(3) == 0 {
		// While a node is paused past its lease (and someone may claim its
		// ID), Redis fails over to a replica that missed the last writes.
		out = append(out, Fault{At: f.At + s.LeaseTTL + d.dur(0, f.For-s.LeaseTTL), Kind: FaultFailover})
	}
	if f.State == StateCopy && d.IntN(2) == 0 {
		// A node starts from a copy of another's state file and takes its
		// lease over while the original is cut off; once the copy issues,
		// Redis loses the takeover; then the original comes back.
		back := f.At + f.For
		loss := []string{FaultFailover, FaultRestartSaved, FaultRestoreOld}[d.IntN(3)]
		out = append(out,
			Fault{At: back - d.dur(0, 500*time.Millisecond), Kind: FaultPartition, Node: f.From, For: ahead + d.dur(3*time.Second, 2*s.LeaseTTL)},
			Fault{At: back + ahead + d.dur(0, 3*time.Second), Kind: loss})
	}
	if (f.Kind == FaultRestartEmpty || f.Kind == FaultRestoreOld) && s.BitsSequence > 1 && d.IntN(2) == 0 {
		// A node with another layout comes up while the registry is empty
		// (NOREGISTRY until a node of the fleet restores it).
		stray := Fault{At: f.At + d.dur(0, 2*time.Second), Kind: FaultCrash, Node: d.IntN(len(s.Nodes)),
			For: d.dur(0, 200*time.Millisecond), State: StateNone, Layout: true}
		out = append(out, stray)
		if d.IntN(2) == 0 {
			// And then Redis fails over to a replica that caught up while
			// the stray was retrying (and the fleet restoring the registry).
			out = append(out, Fault{At: stray.At + d.dur(time.Second, s.LeaseTTL/2), Kind: FaultFailover})
		}
	}
	return out
}

func sortFaults(fs []Fault) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].At < fs[j-1].At; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

// String describes the schedule, one fault per line.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %v, layout %d bits: %d sequence + %d machine bits (%d region bits, region %d), lease TTL %v, max skew %v, timer slack %v, replica lag %v, snapshot every %v\n",
		s.Seed, s.Duration, s.BitsID, s.BitsSequence, s.BitsMachineID, s.BitsRegion, s.Region, s.LeaseTTL, s.MaxSkew, s.Slack, s.ReplicaLag, s.SaveEvery)
	for i, n := range s.Nodes {
		fmt.Fprintf(&b, "  node %d: %s, %d machine IDs, max lead %v, reserve ahead %v, check every %v\n",
			i, n.Mode, n.MachineIDs, n.MaxLead, n.ReserveAhead, n.CheckInterval)
	}
	fmt.Fprintf(&b, "  two replicas (the second catching up every %v), repl-timeout %v, detached replicas pointed at the master after %v, round trip %v, min replicas %d\n",
		s.ReplicaLag2, s.ReplTimeout, s.ReattachAfter, s.RTT, s.MinReplicas)
	if c := s.Sentinel; c != nil {
		fmt.Fprintf(&b, "  %d Sentinels, quorum %d, down-after %v, failover-timeout %v\n", c.Count, c.Quorum, c.DownAfter, c.FailoverTimeout)
	}
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	return b.String()
}
