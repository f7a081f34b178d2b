package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/flaked/flaked/internal/redisinfo"
)

// replication: the role of each server the fleet writes to, its replicas
// and min-replicas-*. A replica as the fleet's Redis is unsafe (a writable
// one diverges from its master; a read-only one refuses every write).
func init() { register("replication", false, checkReplication) }

func checkReplication(ctx context.Context, e *env) []Result {
	ss, err := e.servers(ctx)
	if err != nil {
		return nil
	}
	var out []Result
	for _, s := range ss {
		r := Result{Server: s.addr}
		info := s.info
		if info == "" {
			var err error
			if info, err = s.c.Info(ctx, "replication").Result(); err != nil {
				r.Status, r.Detail = Costly, "cannot tell: INFO replication: "+err.Error()
				out = append(out, r)
				continue
			}
		}
		role, _ := redisinfo.Field(info, "role")
		slaves, _ := redisinfo.Field(info, "connected_slaves")
		minTo, minLag := "unknown (CONFIG GET refused)", "unknown"
		if !e.t.AsNode {
			if m, err := s.c.ConfigGet(ctx, "min-replicas-*").Result(); err == nil {
				minTo, minLag = m["min-replicas-to-write"], m["min-replicas-max-lag"]
			}
		}
		if role != "master" {
			r.Status = Unsafe
			r.Detail = "role " + role + ": the fleet's Redis is a replica (writes are refused, or diverge from its master)"
			r.Fix = "point --redis at the master, or at Sentinel (redis-sentinel://)"
			out = append(out, r)
			continue
		}
		r.Detail = fmt.Sprintf("role master, %s replicas connected (%s), min-replicas-to-write %s, min-replicas-max-lag %s",
			slaves, strings.Join(replicaAddrs(info), " "), minTo, minLag)
		out = append(out, r)
	}
	return out
}
