package doctor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinel: the timings of each Sentinel watching the fleet's master.
// down-after-milliseconds is how long a master is unreachable before a
// failover starts: nodes cannot renew meanwhile, and lose their leases if
// it exceeds what is left of them.
func init() { register("sentinel", false, checkSentinel) }

func checkSentinel(ctx context.Context, e *env) []Result {
	if len(e.t.Sentinels) == 0 {
		return nil
	}
	var out []Result
	for _, addr := range e.t.Sentinels {
		r := Result{Server: addr}
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: e.t.SentinelPassword, DialTimeout: 2 * time.Second, MaxRetries: -1, DisableIdentity: true})
		m, err := sc.Master(ctx, e.t.MasterName).Result()
		_ = sc.Close()
		if err != nil {
			r.Status, r.Detail = Costly, fmt.Sprintf("cannot tell: SENTINEL MASTER %s: %v", e.t.MasterName, err)
			r.Fix = "check the Sentinel address and master name"
			out = append(out, r)
			continue
		}
		down, _ := strconv.Atoi(m["down-after-milliseconds"])
		r.Detail = fmt.Sprintf("master %s at %s:%s, flags %s, quorum %s, %s replicas, %s sentinels; down-after-milliseconds %s, failover-timeout %s",
			e.t.MasterName, m["ip"], m["port"], m["flags"], m["quorum"], m["num-slaves"], m["num-other-sentinels"],
			m["down-after-milliseconds"], m["failover-timeout"])
		if m["flags"] != "master" {
			r.Status = Costly
			r.Fix = "the Sentinel sees the master as " + m["flags"]
		}
		if d := time.Duration(down) * time.Millisecond; d > e.t.LeaseTTL*2/3 {
			r.Status = Costly
			r.Detail += fmt.Sprintf("; a failover starts after %v, longer than a lease outlives its last renewal (%v of the %v TTL): nodes lose their leases and claim again (no duplicate)",
				d, e.t.LeaseTTL*2/3, e.t.LeaseTTL)
			r.Fix = "a longer --lease-ttl, or a shorter down-after-milliseconds"
		}
		out = append(out, r)
	}
	return out
}
