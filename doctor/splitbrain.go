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
// replicas (coord/doc.go, Split brain), so a replica promoted while the
// old master still grants holds everything the nodes used, provided the
// mark counted it. Two things break that: the mark above the replicas
// online (every grant refused: the fleet stops, safely) and a replica
// Sentinel knows but the mark does not count (it attached and went away
// between two grants: promoted, it may lack grants).
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
		out = append(out, sentinelReplicas(ctx, e, max(m.Mark, floor))...)
	}
	return out
}

// sentinelReplicas compares, for each Sentinel, the replicas it knows (the
// ones it may promote) with the mark.
func sentinelReplicas(ctx context.Context, e *env, mark int) []Result {
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
		// Sentinel promotes none that it sees down or disconnected.
		known := 0
		for _, rep := range reps {
			if !strings.Contains(rep["flags"], "down") && !strings.Contains(rep["flags"], "disconnected") {
				known++
			}
		}
		if known > mark {
			r.Status = Unsafe
			r.Detail = fmt.Sprintf("Sentinel knows %d replicas of %s, grants wait for %d (the mark, or --min-replicas when higher): a replica they do not count may be promoted without the grants the nodes used",
				known, e.t.MasterName, mark)
			r.Fix = "let the replica attach (the next grant raises the mark to the replicas listed), or SENTINEL RESET " + e.t.MasterName + " if it is gone"
		} else {
			r.Detail = fmt.Sprintf("Sentinel knows %d replicas of %s; grants wait for %d (the mark, or --min-replicas when higher)", known, e.t.MasterName, mark)
		}
		out = append(out, r)
	}
	return out
}
