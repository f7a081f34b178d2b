package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
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
	ruleFailover, rulePending, ruleLateMaxAge, ruleLateDownAfter, ruleRunIDUnread, ruleVouchedReplaced,
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
	rulePending       = "sentinel: refused: a PING pending for nearly down-after"
	ruleLateMaxAge    = "sentinel: refused: the grant came past MaxCheckAge"
	ruleLateDownAfter = "sentinel: refused: the grant came past the down-after bound"
	ruleRunIDUnread   = "sentinel: refused: the granting server's run ID unread"
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
	reply, ok := c.reply.([]any)
	if c.err != nil || !ok || len(reply) == 0 || reply[0] != "OK" || max(p.lastMark, r.s.MinReplicas) <= 0 {
		return // no grant, or one no replica must hold: the Waiter asks nothing of the Sentinels
	}
	server, _ := v.(string)
	if err != nil {
		server = ""
	}
	runID, _, _ := strings.Cut(server, ":")
	win := replwait.WindowOf(c.sent, c.views, runID)
	switch {
	case win.Until > 0 && r.w.now < win.Until:
		p.unwaited = false // used on the Sentinels' word
		r.rules[ruleVouched]++
		if at, ok := r.redis.replacedAt[p.pinned]; ok && p.ranReplaced && p.ranAt-at > replwait.MaxCheckAge {
			r.rules[ruleVouchedReplaced]++
			r.redis.log("node %d: a grant the old master ran after a promotion vouched for: sent %v, views %+v", p.slot.i, c.sent, c.views)
		}
		return
	case win.Until > 0 && win.Until == c.sent+replwait.MaxCheckAge:
		r.rules[ruleLateMaxAge]++
		return
	case win.Until > 0:
		r.rules[ruleLateDownAfter]++
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
		seen[rulePending] = true
	}
	for k := range seen {
		r.rules[k]++
	}
}
