package doctor

import (
	"context"
	"fmt"

	"github.com/flaked/flaked/internal/redisinfo"
)

// persistence: what a crash-restart of Redis costs. guard.lua notices the
// restart (a new run_id) whatever was persisted, so this is never unsafe:
// claims then start a horizon after the restart and counter segments a
// lead after it, and what was not persisted is gone from the audit too.
func init() { register("persistence", true, checkPersistence) }

func checkPersistence(ctx context.Context, e *env) []Result {
	ss, err := e.servers(ctx)
	if err != nil {
		return nil
	}
	var out []Result
	for _, s := range ss {
		r := Result{Server: s.addr}
		info, err := s.c.Info(ctx, "persistence").Result()
		if err != nil {
			r.Status, r.Detail = Costly, "cannot tell: INFO persistence: "+err.Error()
			r.Fix = "grant +info to read it"
			out = append(out, r)
			continue
		}
		aof, _ := redisinfo.Field(info, "aof_enabled")
		fsync, save := "unknown (CONFIG GET refused)", "unknown (CONFIG GET refused)"
		if !e.t.AsNode {
			if m, err := s.c.ConfigGet(ctx, "appendfsync").Result(); err == nil {
				fsync = m["appendfsync"]
			}
			if m, err := s.c.ConfigGet(ctx, "save").Result(); err == nil {
				save = fmt.Sprintf("%q", m["save"])
			}
		}
		switch {
		case aof == "1" && fsync == "always":
			r.Detail = "appendonly yes, appendfsync always: a crash-restart loses no acknowledged write; guard.lua still sees the new run_id and claims start a horizon past the restart"
		case aof == "1":
			r.Status = Costly
			r.Detail = "appendonly yes, appendfsync " + fsync + ": a crash-restart may lose the last second of writes; guard.lua sees the new run_id: claims start a horizon past the restart, counter segments start a lead later (no duplicate)"
			r.Fix = "appendfsync always loses nothing (at a cost per write)"
		default:
			r.Status = Costly
			r.Detail = "appendonly no (save " + save + "): a crash-restart loses every write since the last snapshot, or all of them, with the audit trail; guard.lua sees the new run_id: the registry is remade, claims start a horizon past the restart (no duplicate)"
			r.Fix = "appendonly yes with appendfsync everysec or always"
		}
		out = append(out, r)
	}
	return out
}
