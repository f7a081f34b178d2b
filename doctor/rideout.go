package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/redisinfo"
	"github.com/flaked/flaked/internal/replwait"
)

// rideout: how long the fleet rides out one replica away, resyncing or
// lagging. Through Sentinel, as long as every Sentinel reports the master
// up: a grant made meanwhile cannot be one a promoted replica lacks
// (coord/doc.go, Split brain), so no grant waits for the replicas. Without
// Sentinel, grants wait for the fleet's mark of replicas: with one away
// the nodes issue from what they hold (their reach, --reserve-ahead) and
// then stop until it is back or the operator lowers the mark.
func init() { register("rideout", false, checkRideOut) }

// reliableDownAfter: a Sentinel PINGs a master once a second, and a check
// vouches for a grant only while down-after-milliseconds minus the age of
// its last reply is left; below this, checks often find too little left.
const reliableDownAfter = 2 * time.Second

func checkRideOut(ctx context.Context, e *env) []Result {
	if len(e.t.Sentinels) == 0 {
		return []Result{{Detail: "no Sentinel: grants wait for the fleet's mark of replicas (the splitbrain check); with one of them away, " +
			"resyncing or more than --replica-wait behind, nodes issue from what they hold for their reach (--reserve-ahead, 12 s by default) and then stop " +
			"until it is back, or until the mark is lowered for a planned restart (flaked audit replicas --set N; it rises again when the replica is listed)",
			Fix: "reach Redis through Sentinel (redis-sentinel://) to ride out replica trouble for as long as it lasts"}}
	}
	set := coord.NewSentinelSet(e.t.MasterName, e.t.Sentinels, "", e.t.SentinelPassword, nil)
	defer set.Close()
	info, err := e.t.Redis.Info(ctx, "server").Result()
	if err != nil {
		return []Result{{Status: Costly, Detail: "cannot tell: INFO server: " + err.Error()}}
	}
	runID, _ := redisinfo.Field(info, "run_id")
	sent := time.Duration(time.Now().UnixNano())
	views := set.Views(ctx)
	w := replwait.WindowOf(sent, views, runID)
	r := Result{}
	if w.Until == 0 {
		r.Status = Costly
		r.Detail = "the Sentinels do not vouch for grants now (" + w.Why + "): grants wait for the fleet's mark of replicas, " +
			"and with one away nodes issue for their reach (--reserve-ahead, 12 s by default), then stop"
		r.Fix = "bring every Sentinel of the master back, each seeing the master up"
		return []Result{r}
	}
	r.Detail = "every Sentinel reports the master up: a replica away, resyncing or lagging stops no grant for as long as that holds " +
		"(a grant made while no Sentinel can have started a failover is covered by a promoted replica's loss floor, replicated or not)"
	for _, v := range views {
		if v.DownAfter > 0 && v.DownAfter < reliableDownAfter {
			r.Status = Costly
			r.Detail += fmt.Sprintf("; %s has down-after-milliseconds %d: it PINGs the master once a second at most, and a check whose last reply is nearly that old vouches for nothing, so some grants wait for the replicas",
				v.Sentinel, v.DownAfter.Milliseconds())
			r.Fix = fmt.Sprintf("sentinel down-after-milliseconds %s %d or more", e.t.MasterName, reliableDownAfter.Milliseconds())
		}
	}
	return []Result{r}
}
