package doctor

import (
	"context"
	"strings"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redisinfo"
)

// eviction: maxmemory-policy allkeys-* may evict {ns}:meta, the
// reservations and the layout (guard.lua refuses it whatever maxmemory
// says: both can be set live); volatile-* evicts only keys with a TTL, the
// leases, and an evicted lease reads as an expired one (a takeover above
// its reservation: no duplicate, a node claims again).
func init() { register(contract.UnsafeEviction, true, checkEviction) }

func checkEviction(ctx context.Context, e *env) []Result {
	ss, err := e.servers(ctx)
	if err != nil {
		return nil // the identity check says why
	}
	var out []Result
	for _, s := range ss {
		r := Result{Server: s.addr}
		policy, _ := redisinfo.Field(s.info, "maxmemory_policy")
		maxmem, _ := redisinfo.Field(s.info, "maxmemory")
		switch {
		case s.refuse != "" && s.refusedCheck() == contract.UnsafeEviction:
			r.Status, r.Detail = Unsafe, s.refusal()
			r.Fix = "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or give the cache its own Redis"
		case s.err != nil || s.refuse != "" || policy == "":
			r.Status, r.Detail = Costly, "cannot tell: the probe read no maxmemory_policy (see the identity check)"
		case strings.HasPrefix(policy, "volatile-"):
			r.Status = Costly
			r.Detail = "maxmemory-policy " + policy + " (maxmemory " + maxmem + "): Redis may evict leases (the only keys with a TTL) under memory pressure; " +
				"an evicted lease reads as expired: its machine ID is taken over above its reservation (no duplicate) and its node claims again"
			r.Fix = "noeviction, or a Redis of its own, keeps leases until their TTL"
		default:
			r.Detail = "maxmemory-policy " + policy + ": the registry's keys are never evicted"
			if maxmem != "" && maxmem != "0" {
				r.Detail += " (when maxmemory " + maxmem + " is reached, writes fail with OOM: nodes stop granting, no duplicate)"
			}
		}
		out = append(out, r)
	}
	return out
}
