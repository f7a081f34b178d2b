package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
)

// splitbrain: the fleet's replicas high-water mark against the replicas
// the master lists and, with Sentinel, the replicas Sentinel may promote.
// A grant is used only once WAIT confirms it on the mark's number of
// replicas (coord/doc.go, Split brain), or, through Sentinel, when the
// Sentinels vouch for it or every replica they know confirms it. Two
// things break that: the mark above the replicas online (every grant
// refused: the fleet stops, safely) and, with no replica waited for at
// all (mark and --min-replicas 0), a replica Sentinel may promote.
func init() { register("splitbrain", true, checkSplitBrain) }

func checkSplitBrain(ctx context.Context, e *env) []Result {
	m, err := coord.SplitBrainCheck(ctx, e.t.Redis, e.t.Namespace)
	if err != nil {
		return []Result{{Status: Costly, Detail: "cannot tell: " + err.Error(),
			Fix: "the node's Redis user needs INFO and HGET (deploy/redis/acl.conf)"}}
	}
	r := Result{}
	floor := e.t.minReplicas()
	switch {
	case floor > m.Online:
		r.Status = Costly
		r.Detail = fmt.Sprintf("grants are refused: --min-replicas is %d (1 by default through Sentinel) but the master has %d replicas online (%s)",
			floor, m.Online, strings.Join(m.Replicas, ", "))
		r.Fix = "bring a replica back, or start the nodes with --min-replicas 0 (a split brain may then repeat IDs: docs/model.md)"
	case m.Mark < 0:
		r.Detail = fmt.Sprintf("no registry yet: the first grant sets the mark to the %d replicas listed; the floor (--min-replicas) is %d", m.Listed, floor)
	case m.Problem() != "":
		r.Status, r.Detail = Costly, m.Problem()
		r.Fix = fmt.Sprintf("bring the replicas back, or flaked audit replicas --set %d once they are gone for good", m.Online)
	case max(m.Mark, floor) == 0:
		r.Detail = "no replica: nothing to split from, no WAIT after grants (--min-replicas 0)"
	default:
		r.Detail = fmt.Sprintf("every grant waits for %d of the %d replicas online (the mark %d, the floor --min-replicas %d): a replica promoted in the master's place holds what the nodes used",
			max(m.Mark, floor), m.Online, m.Mark, floor)
	}
	if len(e.t.Sentinels) > 0 && floor == 0 && r.Status == OK {
		// A mark of 0 on a master Sentinel may replace opens the model's
		// two split-brain trails (docs/model.md, Findings).
		r.Status = Costly
		r.Detail += "; with Sentinel and --min-replicas 0, a mark made while the master was cut off from its replica, or lowered to 0 by a promotion, lets a split brain repeat IDs"
		r.Fix = "leave --min-replicas unset (1 through Sentinel) or set it to the replicas kept up through a failover"
	}
	out := []Result{r}
	if m.Mark >= 0 {
		out = append(out, sentinelReplicas(ctx, e, max(m.Mark, floor), m.Online)...)
	}
	return out
}

// sentinelReplicas compares, for each Sentinel, the replicas it knows (the
// ones it may promote) with what grants wait for: a grant the Sentinels do
// not vouch for waits for every replica they know (internal/replwait),
// unless it waits for none (mark for the replicas and its floor both 0).
func sentinelReplicas(ctx context.Context, e *env, mark, online int) []Result {
	var out []Result
	for _, addr := range e.t.Sentinels {
		r := Result{Server: addr}
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: e.t.SentinelPassword, DialTimeout: 2 * time.Second, MaxRetries: -1, DisableIdentity: true})
		reps, err := sc.Replicas(ctx, e.t.MasterName).Result()
		_ = sc.Close()
		if err != nil {
			r.Status, r.Detail = Costly, fmt.Sprintf("cannot tell: SENTINEL REPLICAS %s: %v", e.t.MasterName, err)
			out = append(out, r)
			continue
		}
		// Sentinel promotes none that it sees down or disconnected, but
		// keeps each one it once saw until SENTINEL RESET.
		promotable := 0
		for _, rep := range reps {
			if !strings.Contains(rep["flags"], "down") && !strings.Contains(rep["flags"], "disconnected") {
				promotable++
			}
		}
		switch {
		case mark == 0 && promotable > 0:
			r.Status = Unsafe
			r.Detail = fmt.Sprintf("Sentinel knows %d replicas of %s it may promote, and grants wait for none (the mark 0, --min-replicas 0): a replica promoted while the old master still grants lacks the grants the nodes used",
				promotable, e.t.MasterName)
			r.Fix = "leave --min-replicas unset (1 through Sentinel), or let the replica attach (the next grant raises the mark), or SENTINEL RESET " + e.t.MasterName + " if it is gone"
		case len(reps) > online:
			r.Status = Costly
			r.Detail = fmt.Sprintf("Sentinel knows %d replicas of %s and %d are online: a grant the Sentinels do not vouch for waits for all %d and is refused",
				len(reps), e.t.MasterName, online, len(reps))
			r.Fix = "bring the replicas back, or SENTINEL RESET " + e.t.MasterName + " on every Sentinel once one is gone for good"
		default:
			r.Detail = fmt.Sprintf("Sentinel knows %d replicas of %s; a grant the Sentinels do not vouch for waits for all of them (at least the mark or --min-replicas: %d)",
				len(reps), e.t.MasterName, mark)
		}
		out = append(out, r)
	}
	return out
}
