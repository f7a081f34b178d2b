package replwait

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/flaked/flaked/internal/bugs"
)

// The Sentinel rule: a grant is used, whatever the replicas acknowledged,
// when a check of the Sentinels sent just before it proves that no replica
// can have been promoted in place of the master that made it.
//
// Why that is safe. Every grant is capped at the granting master's TIME +
// the fleet's horizon (counter values at TIME + the lead; a sequence's
// values at its rate bound), and a replica promoted at P records a loss at
// its first script, at P or later, whose floors start a Redis clock skew
// (1 s) and a horizon above it. So a grant made before P is covered by the
// promoted replica's floors whether it replicated or not; only grants made
// after P (the old master, cut off, still granting) need the replicas.
//
// When can P come? Sentinel promotes only after a leader Sentinel sees the
// master subjectively down itself: a PING unanswered for its
// down-after-milliseconds (or no valid reply for as long while its link is
// down). Other Sentinels' votes for objective down may be cached for
// seconds, so only the leader's own view is live; the leader can be any
// Sentinel. A check that reaches every Sentinel of the deployment, each
// naming the same master (by run ID, the server that ran the grant), none
// flagging it down, disconnected or in a failover, bounds P from below by
// the earliest of sent + down-after − age over them, age being how long
// that Sentinel's pending PING or its last valid reply goes back.
//
// A check sent after the grant's reply needs no down-after bound: each
// Sentinel answered after the grant ran, and a promotion by Sentinel
// happens inside its leader's failover, which that leader flags from its
// start and ends naming the new master. Every Sentinel naming the master
// up with no failover then proves that none had begun when the grant ran.
// The check the node sends with a grant answers before it runs, to save
// the round trip; when its down-after bound leaves the grant out (a
// Sentinel's last reply or pending PING nearly down-after old, as at the
// end of every ping period with a short down-after), the node asks again
// (Waiter.run). MaxCheckAge is kept either way: no Sentinel flags a
// promotion by hand.
//
// A promotion that skips failure detection (SENTINEL FAILOVER,
// REPLICAOF NO ONE by hand) is not bounded by down-after: the check then
// bounds only the time from the check to the grant (MaxCheckAge), which
// the 1 s Redis clock allowance of the loss floors covers as long as the
// Redis servers' clocks agree within 1 s − MaxCheckAge. A leader Sentinel
// flags failover_in_progress from the start of a failover, so a check that
// reaches it after the start refuses.

// MaxCheckAge is the longest time from sending a Sentinel check to the
// reply of the grant it vouches for.
const MaxCheckAge = 100 * time.Millisecond

// SentinelView is one Sentinel's answer to SENTINEL MASTER <name>.
type SentinelView struct {
	// Sentinel is the Sentinel's address, ID its own ID (SENTINEL MYID)
	// and Others the IDs of the other Sentinels it knows watching the
	// master (SENTINEL SENTINELS): a check counts Sentinels by ID, since
	// one Sentinel may be reached under two addresses.
	Sentinel, ID string
	Others       []string
	// Err is why it gave no view (unreachable, unknown master, denied).
	Err error
	// MasterAddr ("ip:port") and RunID: the master as the Sentinel knows
	// it. RunID is refreshed from the master's INFO every 10 s, so for
	// that long after a master restart the rule does not apply (the
	// replicas' WAIT still does).
	MasterAddr, RunID string
	// Flags: "master" for a master the Sentinel sees up; anything else
	// (s_down, o_down, disconnected, failover_in_progress, ...) refuses.
	Flags string
	// DownAfter is its down-after-milliseconds.
	DownAfter time.Duration
	// Known is how many Sentinels it knows, itself included
	// (num-other-sentinels + 1).
	Known int
	// Replicas is how many replicas of the master it knows (num-slaves):
	// the ones it may promote. A Sentinel keeps a replica it once saw,
	// down or not, until SENTINEL RESET. With Err set: the count of the
	// last check any Sentinel answered (ReplicaMemory), 0 before any.
	Replicas int
	// Age is the larger of last-ping-sent (how long its PING has been
	// pending, 0 when none is) and last-ok-ping-reply (its last valid
	// reply): down-after counts from the older of the two.
	Age time.Duration
}

// Sentinels gives the views of every Sentinel watching a master, asked at
// once. Views returns one per Sentinel it knows of, with Err set for those
// it could not ask (and their Replicas remembered: ReplicaMemory); a deployment's Sentinels that the set does not know
// count as not answering (the others name them: SentinelView.Others and
// Known).
type Sentinels interface {
	Views(ctx context.Context) []SentinelView
}

// knownReplicas is the most replicas the views name (SentinelView.Replicas:
// those the Sentinels that answered know, and what the others answered
// last), and false when none answered and none is remembered: the
// replicas the Sentinels may promote are then unknown. A grant they do
// not vouch for waits for that many. The mark counts the replicas the
// master has listed since it took the registry over; the Sentinels may
// promote one it has not listed yet (the SPIN model's repl-known-counter,
// docs/model.md). They can promote only the replicas they know, and with
// every one of them acknowledging, a master that lost one to a promotion
// can no longer get a grant used.
func knownReplicas(views []SentinelView) (int64, bool) {
	if bugs.SentinelReplicasIgnored {
		return 0, true
	}
	n, ok := int64(0), false
	for _, v := range views {
		n = max(n, int64(v.Replicas))
		ok = ok || v.Err == nil || v.Replicas > 0
	}
	return n, ok
}

// ReplicaMemory carries the replicas the Sentinels know from one check to
// the next, for a Sentinels of one process, which all its Waiters share:
// a check no Sentinel answers still knows the replicas they may promote,
// also for a Waiter whose first check it is (a counter started in the
// middle of an outage).
type ReplicaMemory struct {
	mu sync.Mutex
	n  int
}

// Fill records the most replicas the answering views name, when any
// answered, and gives each view that did not answer the count of the last
// check any answered (0 before any).
func (m *ReplicaMemory) Fill(views []SentinelView) []SentinelView {
	m.mu.Lock()
	defer m.mu.Unlock()
	answered, n := false, 0
	for _, v := range views {
		if v.Err == nil {
			answered, n = true, max(n, v.Replicas)
		}
	}
	if answered {
		m.n = n
	}
	for i := range views {
		if views[i].Err != nil {
			views[i].Replicas = m.n
		}
	}
	return views
}

// Window is what a Sentinel check proves: no replica can have been
// promoted in place of the master with run ID RunID before Until, on the
// clock the check's send time was read from. Why says why it proves
// nothing when Until is zero.
//
// Up is the part that holds whenever the check was sent: every Sentinel
// answered, naming that master up with no failover, so no Sentinel had
// begun a promotion when it answered. Until bounds a promotion after the
// answers, for a check sent before the grant ran; a check sent after the
// grant's reply needs only Up (Waiter.run asks again when the first
// check's PING ages leave out a grant that came within MaxCheckAge).
type Window struct {
	Until time.Duration
	Why   string
	Up    bool
}

// rateMargin is the share of down-after kept back for the Sentinels' and
// the node's clocks running at different rates.
const rateMargin = 100

// WindowOf is the Window of a check sent at sent (a Monotonic reading)
// whose answers are views, for the master with run ID runID.
func WindowOf(sent time.Duration, views []SentinelView, runID string) Window {
	if len(views) == 0 {
		return Window{Why: "no Sentinel answered"}
	}
	if runID == "" {
		return Window{Why: "the master's run ID is unknown"}
	}
	known := 0
	answered, required := map[string]bool{}, map[string]bool{}
	until := sent + MaxCheckAge
	if bugs.SentinelNoMaxCheckAge {
		until = math.MaxInt64
	}
	var bad []string
	for _, v := range views {
		known = max(known, v.Known)
		if v.Err == nil {
			answered[v.ID] = true
			required[v.ID] = true
			for _, o := range v.Others {
				required[o] = true
			}
		}
		flags := v.Flags
		if bugs.SentinelFailoverIgnored {
			flags = strings.Replace(flags, ",failover_in_progress", "", 1)
		}
		switch {
		case v.Err == nil && v.ID == "":
			bad = append(bad, fmt.Sprintf("%s gave no Sentinel ID", v.Sentinel))
		case v.Err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", v.Sentinel, v.Err))
		case v.RunID != runID && !bugs.SentinelRunIDUnchecked:
			bad = append(bad, fmt.Sprintf("%s names master %s (run ID %.8s), not the one that granted (%.8s)", v.Sentinel, v.MasterAddr, v.RunID, runID))
		case flags != "master":
			bad = append(bad, fmt.Sprintf("%s sees %s as %s", v.Sentinel, v.MasterAddr, v.Flags))
		case v.DownAfter <= 0:
			bad = append(bad, fmt.Sprintf("%s gave no down-after-milliseconds", v.Sentinel))
		default:
			until = min(until, sent+v.DownAfter-v.DownAfter/rateMargin-v.Age)
		}
	}
	if bugs.SentinelQuorum && len(views)-len(bad) > known/2 {
		bad, known, required = nil, 0, answered
	}
	if len(bad) > 0 {
		return Window{Why: strings.Join(bad, "; ")}
	}
	if n := len(answered); n < len(required) || n < known {
		return Window{Why: fmt.Sprintf("%d of the %d Sentinels answered", n, max(len(required), known))}
	}
	if until <= sent {
		return Window{Up: true, Why: "a Sentinel's PING to the master is pending, or its last reply is, for nearly its down-after-milliseconds"}
	}
	return Window{Until: until, Up: true}
}
