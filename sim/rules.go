package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/bugs"
	"github.com/flaked/flaked/internal/replwait"
	"github.com/flaked/flaked/internal/simredis"
)

// The replica rules' outcomes, counted for the coverage table: how the
// replicas high-water mark ({ns}:meta's replicas) moved at each script,
// read from the server before and after it, and what each grant's
// Sentinel check proved, from the views the Sentinels gave and the times
// the Waiter reads (internal/replwait's WindowOf on the same inputs).
var Rules = []string{
	ruleMarkRaised, ruleMarkBySet, ruleMarkKept, ruleMarkLowered, ruleMarkFloored, ruleKnownFloored, ruleMarkStarted,
	ruleAckedReplaced,
	ruleVouched, ruleUnreachable, ruleOtherMaster, ruleOldRunID, ruleSDown, ruleODown, ruleDisconnected,
	ruleFailover, rulePending, ruleLateMaxAge, ruleLateDownAfter, ruleRunIDUnread, ruleRecheckVouched, ruleRecheckRefused,
	ruleVouchedReplaced,
}

const (
	ruleMarkRaised = "mark: raised to the replicas listed"
	// Two replicas listed in turns, never together, count two: the mark
	// raised above the replicas listed now by those listed since the
	// server took the registry over, by address.
	ruleMarkBySet   = "mark: raised above the replicas listed now by those listed since, by address"
	ruleMarkKept    = "mark: kept across a change of server other than a promotion (a restart)"
	ruleMarkLowered = "mark: lowered by one after a promotion"
	ruleMarkFloored = "mark: a grant waits for MinReplicas, above the mark"
	// Through Sentinel, a grant the Sentinels do not vouch for waits for
	// every replica they know, when that is more than the mark and
	// MinReplicas (two replicas never listed together leave the mark low).
	ruleKnownFloored = "mark: a grant waits for every replica the Sentinels know, above the mark and MinReplicas"
	ruleMarkStarted  = "mark: started from the replicas listed ({ns}:meta made again)"
	// A grant an old master ran after a replica was promoted in its place,
	// used on the replicas' count: acknowledged by the replicas WAIT asked
	// for (a replica on its side of a split brain), or with none asked
	// (no WAIT followed it and the Sentinels did not vouch). The promoted
	// replica may lack it: safe only while the count takes in every
	// replica that may be promoted.
	ruleAckedReplaced = "mark: a grant an old master ran after a promotion, used on the replicas' count"
	ruleVouched       = "sentinel: vouched (the grant used without WAIT)"
	ruleUnreachable   = "sentinel: refused: a Sentinel did not answer"
	ruleOtherMaster   = "sentinel: refused: a Sentinel names another master"
	ruleOldRunID      = "sentinel: refused: a Sentinel names the master with an old run ID"
	ruleSDown         = "sentinel: refused: a Sentinel sees the master s_down"
	ruleODown         = "sentinel: refused: a Sentinel sees the master o_down"
	ruleDisconnected  = "sentinel: refused: a Sentinel's link to the master is disconnected"
	ruleFailover      = "sentinel: refused: failover_in_progress"
	// The first check leaves the grant out by its bound alone (every
	// Sentinel names the master up): past MaxCheckAge it is refused; by
	// the down-after bound, within MaxCheckAge, the Waiter asks again
	// after the grant's reply, and that second check vouches or refuses.
	rulePending        = "sentinel: first check: a PING pending (or a last reply) nearly down-after old"
	ruleLateMaxAge     = "sentinel: refused: the grant came past MaxCheckAge"
	ruleLateDownAfter  = "sentinel: first check: the grant came past the down-after bound"
	ruleRecheckVouched = "sentinel: vouched by the second check, after the grant's reply"
	ruleRecheckRefused = "sentinel: refused by the second check, after the grant's reply"
	ruleRunIDUnread    = "sentinel: refused: the granting server's run ID unread"
	// A grant an old master ran more than MaxCheckAge after a replica was
	// promoted in its place, vouched for. The rule vouches for a grant run
	// at most MaxCheckAge after a promotion the Sentinels report (inside
	// the Redis clocks' allowance); past it only where every Sentinel
	// still reports the old master up with no failover, as after a
	// leader Sentinel restarted in the middle of its failover
	// (sentinel-leader-restart).
	ruleVouchedReplaced = "sentinel: vouched a grant an old master ran past MaxCheckAge after a promotion"
)

var metaKey = contract.NewKeys(namespace).Meta

// sentinelCheck is a Waiter's Sentinel check in flight: when it was sent,
// what the Sentinels answered, and the reply of its script.
type sentinelCheck struct {
	sent  time.Duration
	views []replwait.SentinelView
	reply any
	err   error
}

// markState is {ns}:meta's server and replicas fields on a server.
type markState struct {
	server string
	mark   int
	ok     bool
}

func markOf(srv *simredis.Server) markState {
	server, ok := srv.Field(metaKey, "server")
	m, _ := srv.Field(metaKey, "replicas")
	n, _ := strconv.Atoi(m)
	return markState{server: server, mark: n, ok: ok}
}

// ruleMark counts how a script on srv moved the mark.
func (r *run) ruleMark(p *proc, srv *simredis.Server, before markState) {
	after := markOf(srv)
	p.lastMark = after.mark
	if after.mark != before.mark || after.server != before.server {
		r.redis.log("mark on %s: %d -> %d (server %.8s -> %.8s)", r.redis.hostOf(srv).addr, before.mark, after.mark, before.server, after.server)
	}
	switch {
	case !after.ok:
	case !before.ok:
		r.rules[ruleMarkStarted]++
	case after.server != before.server:
		if i := strings.LastIndexByte(before.server, ':'); i >= 0 && srv.ReplID2() == before.server[i+1:] {
			r.rules[ruleMarkLowered]++
		} else if before.mark > 0 && after.mark >= before.mark {
			r.rules[ruleMarkKept]++
		}
	case after.mark > before.mark && after.mark > srv.Listed():
		r.rules[ruleMarkBySet]++
	case after.mark > before.mark:
		r.rules[ruleMarkRaised]++
	}
}

// ruleWait counts a WAIT for more replicas than the mark (MinReplicas,
// or the replicas the Sentinels know), and one that confirmed a grant an
// old master ran after a promotion.
func (r *run) ruleWait(p *proc, args []string, v any) {
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return
	}
	switch {
	case n > max(p.lastMark, r.s.MinReplicas):
		r.rules[ruleKnownFloored]++
	case n > p.lastMark:
		r.rules[ruleMarkFloored]++
	}
	p.unwaited = false
	if got, ok := v.(int64); ok && p.ranReplaced && got >= int64(n) {
		r.rules[ruleAckedReplaced]++
		r.redis.log("node %d: a grant the old master ran after a promotion acknowledged by %d of %d replicas", p.slot.i, got, n)
	}
}

// ruleUnwaited counts a grant an old master ran after a promotion that
// the Waiter used with no replica asked: p's next command after the
// grant's pipeline is not its WAIT (or p issues under it at the end of
// the run).
func (r *run) ruleUnwaited(p *proc) {
	p.unwaited = false
	r.rules[ruleAckedReplaced]++
	r.redis.log("node %d: a grant the old master ran after a promotion used with no replica asked", p.slot.i)
}

// ruleCheck counts what a grant's Sentinel check proved, at the reply of
// its pipeline's last command (the read of the server that ran it): v.
func (r *run) ruleCheck(p *proc, v any, err error) {
	c := p.check
	if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
		return // the Waiter sends the script again, with no new check
	}
	p.check = nil
	// As the Waiter decides (replwait.Waiter.run): a grant's reply ends
	// with the replicas it needs and those listed; the Sentinels are asked
	// nothing when no replica must hold it.
	reply, ok := c.reply.([]any)
	floor := r.s.MinReplicas
	if bugs.MinReplicasIgnored {
		floor = 0
	}
	if c.err != nil || !ok || len(reply) < 7 || reply[0] != "OK" || bugs.ReplicaWaitOff || max(needOf(reply), floor) <= 0 {
		return
	}
	server, _ := v.(string)
	if err != nil {
		server = ""
	}
	runID, _, _ := strings.Cut(server, ":")
	win := replwait.WindowOf(c.sent, c.views, runID)
	if win.Until > 0 && r.w.now < win.Until {
		r.vouched(p, c.sent, c.views)
		return
	}
	if win.Up && (r.w.now < c.sent+replwait.MaxCheckAge || bugs.SentinelNoMaxCheckAge) {
		r.recheck(p, runID)
	}
	switch {
	case win.Until > 0 && win.Until == c.sent+replwait.MaxCheckAge:
		r.rules[ruleLateMaxAge]++
		return
	case win.Until > 0:
		r.rules[ruleLateDownAfter]++
		return
	case win.Up:
		r.rules[rulePending]++
		return
	case runID == "":
		r.rules[ruleRunIDUnread]++
		return
	}
	addr := ""
	if p.pinned != nil && r.redis.live(p.pinned) {
		addr = r.redis.hostOf(p.pinned).addr
	}
	seen := map[string]bool{}
	for _, v := range c.views {
		switch {
		case v.Err != nil:
			seen[ruleUnreachable] = true
		case v.RunID != runID && v.MasterAddr == addr:
			seen[ruleOldRunID] = true
		case v.RunID != runID:
			seen[ruleOtherMaster] = true
		default:
			for _, f := range strings.Split(v.Flags, ",") {
				switch f {
				case "s_down":
					seen[ruleSDown] = true
				case "o_down":
					seen[ruleODown] = true
				case "disconnected":
					seen[ruleDisconnected] = true
				case "failover_in_progress":
					seen[ruleFailover] = true
				}
			}
		}
	}
	if len(seen) == 0 {
		seen[ruleUnreachable] = true // fewer answered than the Sentinels know
	}
	for k := range seen {
		r.rules[k]++
	}
}

// vouched counts a grant used on the Sentinels' word, from a check sent at
// sent that gave views.
func (r *run) vouched(p *proc, sent time.Duration, views []replwait.SentinelView) {
	p.unwaited = false
	r.rules[ruleVouched]++
	if at, ok := r.redis.replacedAt[p.pinned]; ok && p.ranReplaced && p.ranAt-at > replwait.MaxCheckAge {
		r.rules[ruleVouchedReplaced]++
		r.redis.log("node %d: a grant the old master ran after a promotion vouched for: sent %v, views %+v", p.slot.i, sent, views)
	}
}

// recheck arms the second check the Waiter sends, on p's goroutine, after
// a grant's reply whose first check left it out (procSentinels.Views):
// the Sentinels answer as it reaches the network, and it vouches when
// every one names the master up with no failover.
func (r *run) recheck(p *proc, runID string) {
	p.sentinels.recheck = func() []replwait.SentinelView {
		sent := r.w.now
		leg := r.s.RTT / 2
		if p.slot.netUntil[FaultDelay] > sent {
			leg += p.slot.delay
		}
		r.w.pass(p, leg)
		views := r.redis.sentinels.views(p.slot.i)
		r.w.pass(p, leg)
		if replwait.WindowOf(sent, views, runID).Up {
			r.rules[ruleRecheckVouched]++
			r.vouched(p, sent, views)
		} else {
			r.rules[ruleRecheckRefused]++
		}
		return views
	}
}

// needOf is how many replicas a grant's reply asks for: the element
// before the last (every granting script ends its reply with need and
// the replicas listed).
func needOf(reply []any) int {
	switch n := reply[len(reply)-2].(type) {
	case int64:
		return int(n)
	case string:
		v, _ := strconv.Atoi(n)
		return v
	}
	return 0
}
