package doctor

import (
	"context"
	"fmt"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/internal/redisinfo"
)

// identity: guard.lua reads run_id and master_replid (INFO server and
// replication) from a script, to notice Redis losing writes; a refusal
// (ACL, rename-command) or a field missing makes every writing script
// refuse (fail closed).
func init() { register(contract.UnsafeIdentity, true, checkIdentity) }

func checkIdentity(ctx context.Context, e *env) []Result {
	ss, err := e.servers(ctx)
	if err != nil {
		return []Result{{Status: Costly, Detail: "cannot list the Redis servers: " + err.Error(), Fix: "check --redis"}}
	}
	var out []Result
	for _, s := range ss {
		r := Result{Server: s.addr}
		switch {
		case e.t.IdentityNone:
			r.Status = Costly
			r.Detail = "the nodes read no identity (--redis-identity=none): a restart from an old snapshot or a failover to a replica that missed writes goes unnoticed, and IDs may repeat after one; the eviction policy is not checked by the scripts either"
			r.Fix = "drop --redis-identity=none wherever the nodes can read INFO (this check says whether they can)"
			if s.refuse == "" && s.err == nil {
				r.Detail += "; INFO is readable from a script here"
			}
		case s.err != nil && redisinfo.IsNoPerm(s.err):
			r.Status, r.Detail = Unsafe, "the user may not run scripts: "+s.err.Error()
			r.Fix = "grant +eval +evalsha and the commands of deploy/redis/acl.conf's flaked-node user"
		case s.err != nil:
			r.Status, r.Detail, r.Fix = Costly, "cannot tell: the probe script failed: "+s.err.Error(), "check that Redis is reachable"
		case s.refuse != "" && s.refusedCheck() == contract.UnsafeIdentity:
			r.Status, r.Detail = Unsafe, s.refusal()
			r.Fix = "see the detail: the writing scripts refuse until it is fixed"
		default:
			r.Detail = fmt.Sprintf("guard.lua reads run_id and master_replid from a script (identity %s)", short(s.id))
			if s.id == "" { // refused for eviction: the identity was read first
				r.Detail = "guard.lua reads run_id and master_replid from a script"
			}
		}
		out = append(out, r)
	}
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}
