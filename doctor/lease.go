package doctor

import (
	"context"
	"fmt"
	"time"
)

// lease: what the lease TTL costs. A crashed node's machine IDs stay
// taken for up to a TTL; nodes renew every TTL/3, and one that cannot
// reach Redis for the rest of its lease gives it up and claims again.
func init() { register("lease", false, checkLease) }

func checkLease(_ context.Context, e *env) []Result {
	ttl := e.t.LeaseTTL
	r := Result{Detail: fmt.Sprintf("lease TTL %v: a crashed node's machine IDs stay taken up to %v; each node renews every %v; a node cut off from Redis for %v gives its lease up (IDs stop, no duplicate)",
		ttl, ttl, (ttl / 3).Round(time.Millisecond), (ttl * 2 / 3).Round(time.Millisecond))}
	switch {
	case ttl < 3*time.Second:
		r.Status = Costly
		r.Fix = "a Redis failover or a pause of a second or two makes nodes give their leases up: --lease-ttl 10s is the default"
	case ttl > time.Minute:
		r.Status = Costly
		r.Fix = "a crashed node's machine IDs stay taken for minutes: a restart with its state file takes them back at once, others wait"
	}
	return []Result{r}
}
