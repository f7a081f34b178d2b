package sim

import (
	"math/rand/v2"
	"time"

	"github.com/flaked/flaked/node"
)

// Adversarial patterns: narrow windows that random draws line up too
// rarely for the coverage table to show their branches reached. A
// schedule draws each with some probability from a stream of its own, so
// every other draw of a seed is what it was before.
const (
	// A takeover racing a release: a node paused past its lease wakes and
	// stops cleanly just as a node restarted without a state file claims
	// (and may take over) its machine ID.
	PatternTakeoverRelease = "takeover-vs-release"
	// A renewal racing the expiry: a node is paused for about a lease TTL
	// less the time since its last renewal, so its next renewal reaches
	// Redis around the moment its lease expires.
	PatternRenewExpiry = "renewal-vs-expiry"
	// A wake-up just after someone else's lead ran out: a node is cut off
	// until its lease and its reservation ahead have run out, and another
	// starts (claims) just after.
	PatternWakeAfterLead = "wake-after-lead"
	// A claim during allkeys-* eviction: keys are evicted fast (the
	// reservations and leases among them) for a second or two, and a node
	// restarted without a state file claims meanwhile and just after.
	PatternEvictClaim = "evict-vs-claim"
	// A takeover lost in a restart: a node is paused; another restarts
	// at once from a copy of its state file and takes its machine ID over
	// (the previous token fences it), issuing above its reservation once
	// the clock gets there; Redis restarts from its last snapshot (which
	// may predate the takeover) and the original wakes just after, its
	// lease live again in the restored data, while the copy still issues
	// under its reservation. Its renewal must not
	// extend that lease across the loss. (Random draws lined this up
	// rarely: the loss must be a restart from a snapshot, since a
	// failover keeps every grant that was used, by the wait after grants.)
	PatternTakeoverLost = "takeover-lost"
)

// Patterns are the adversarial patterns, in draw order (a new one goes
// last, so the draws of the others, and so every seed's schedule, stay).
var Patterns = []string{PatternTakeoverRelease, PatternRenewExpiry, PatternWakeAfterLead, PatternEvictClaim, PatternTakeoverLost}

// drawPatterns adds the adversarial patterns a schedule draws: each with
// probability 1 in 6.
func (s *Schedule) drawPatterns(seed uint64) {
	x := drawer{rand.New(rand.NewPCG(seed, 0x0adf))}
	n := len(s.Nodes)
	if n < 2 {
		return
	}
	for _, p := range Patterns {
		if x.IntN(6) != 0 {
			continue
		}
		a := x.IntN(n)
		b := (a + 1 + x.IntN(n-1)) % n
		at := x.dur(time.Second, s.Duration/2)
		jitter := x.dur(0, 400*time.Millisecond) - 200*time.Millisecond
		ahead := s.Nodes[a].ReserveAhead
		switch p {
		case PatternTakeoverRelease:
			wake := at + s.LeaseTTL + x.dur(0, s.LeaseTTL/3)
			s.Faults = append(s.Faults,
				Fault{At: at, Kind: FaultPause, Node: a, For: wake - at},
				Fault{At: wake + x.dur(0, 50*time.Millisecond), Kind: FaultStop, Node: a, For: x.dur(0, 200*time.Millisecond), State: StateKept},
				Fault{At: wake + jitter, Kind: FaultCrash, Node: b, For: x.dur(0, 100*time.Millisecond), State: StateNone})
		case PatternRenewExpiry:
			s.Faults = append(s.Faults,
				Fault{At: at, Kind: FaultPause, Node: a, For: s.LeaseTTL - x.dur(0, s.LeaseTTL/3) + jitter})
		case PatternWakeAfterLead:
			cut := s.LeaseTTL + ahead
			s.Faults = append(s.Faults,
				Fault{At: at, Kind: FaultPartition, Node: a, For: cut + x.dur(time.Second, 3*time.Second)},
				Fault{At: at + cut + x.dur(0, 300*time.Millisecond), Kind: FaultCrash, Node: b, For: x.dur(0, 100*time.Millisecond), State: StateNone})
		case PatternEvictClaim:
			evict := x.dur(time.Second, 2*time.Second)
			s.Faults = append(s.Faults,
				Fault{At: at, Kind: FaultEvictAllKeys, For: evict, Delay: x.dur(50*time.Millisecond, 300*time.Millisecond)},
				Fault{At: at + x.dur(0, evict), Kind: FaultCrash, Node: b, For: x.dur(0, 100*time.Millisecond), State: StateNone})
		case PatternTakeoverLost:
			// The original holds a lease (not a counter-mode node); the copy
			// issues in flake mode too, and needs no more machine IDs than
			// the original held, or it finds none free to add in the small
			// machine spaces drawn.
			for i := range n {
				if c := (a + i) % n; s.Nodes[c].Mode != node.ModeCounter {
					a = c
					break
				}
			}
			for i := range n {
				c := (b + i) % n
				if c != a && s.Nodes[c].Mode != node.ModeCounter && s.Nodes[c].MachineIDs <= s.Nodes[a].MachineIDs {
					b = c
					break
				}
			}
			if a == b {
				continue
			}
			ahead = s.Nodes[a].ReserveAhead
			// The copy issues once the clock reaches the original's
			// reservation (at most ahead after at); the original, paused,
			// renews as it wakes, with its lease from before the takeover
			// live again in the snapshot.
			loss := at + ahead + x.dur(300*time.Millisecond, 1500*time.Millisecond)
			s.Faults = append(s.Faults,
				Fault{At: at, Kind: FaultPause, Node: a, For: loss - at + x.dur(0, 300*time.Millisecond)},
				Fault{At: at + x.dur(0, 200*time.Millisecond), Kind: FaultCrash, Node: b, For: x.dur(0, 100*time.Millisecond), State: StateCopy, From: a},
				Fault{At: loss, Kind: FaultRestartSaved})
		}
	}
}
