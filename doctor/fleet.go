package doctor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/flake"
)

// fleet: what the registry holds: the layout every node must run, the
// fleet's horizon (how far past a possible loss of writes in Redis every claim starts) and the
// counter's lead (how far counter segments start above the loss), and
// whether the next script will record a loss (the server changed since
// the last write). A namespace without a registry is costly, not unsafe:
// doctor cannot tell a new fleet (flaked init is missing) from a Redis
// that lost its data, whose nodes restore the registry (flaked serve runs
// these checks, and must not refuse such a node's restart).
func init() { register("fleet", false, checkFleet) }

func checkFleet(ctx context.Context, e *env) []Result {
	k := contract.NewKeys(e.t.Namespace)
	r := Result{}
	fields := []string{contract.MetaGeneration, contract.MetaHorizon, contract.MetaCounterLead, contract.MetaLossMs, contract.MetaServer}
	vals, err := e.t.Redis.HMGet(ctx, k.Meta, fields...).Result() // HMGET: the node's user has it
	if err != nil {
		return []Result{{Status: Costly, Detail: "cannot tell: HMGET " + k.Meta + ": " + err.Error()}}
	}
	meta := map[string]string{}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			meta[fields[i]] = s
		}
	}
	stored, err := e.t.Redis.Get(ctx, k.Layout).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return []Result{{Status: Costly, Detail: "cannot tell: GET " + k.Layout + ": " + err.Error()}}
	}
	if missing := missingRegistry(k, meta, stored); missing != "" {
		return []Result{{Status: Costly,
			Detail: "namespace " + e.t.Namespace + " has no registry (" + missing + " missing): flaked serve refuses to start (NOREGISTRY) " +
				"unless it ran under the registry before (its state file), and then restores it: after Redis lost its data",
			Fix: "for a new fleet, run flaked init once with the fleet's --redis, --namespace and layout flags"}}
	}
	l := e.t.Layout
	if stored != "" {
		if sl, err := flake.ParseLayout(stored); err == nil {
			l = sl
		}
		if stored != e.t.Layout.String() {
			r.Status = Costly
			r.Fix = "start nodes with the stored layout's flags (flaked parse shows them): nodes with another layout are refused"
		}
	}
	ticks := func(field string) string {
		n, err := strconv.ParseInt(meta[field], 10, 64)
		if err != nil {
			return "none"
		}
		return (time.Duration(n) * l.TimeUnit).String()
	}
	r.Detail = fmt.Sprintf("layout %q, generation %s, horizon %s (claims after Redis may have lost writes start this far past the loss), counter lead %s (counter segments start this far above a loss)",
		stored, meta[contract.MetaGeneration], ticks(contract.MetaHorizon), ticks(contract.MetaCounterLead))
	if ms, err := strconv.ParseInt(meta[contract.MetaLossMs], 10, 64); err == nil {
		r.Detail += ", last possible loss " + time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	if ss, _ := e.servers(ctx); len(ss) == 1 && ss[0].id != "" && meta[contract.MetaServer] != "" && meta[contract.MetaServer] != ss[0].id {
		r.Detail += "; the registry was last written under another server (a restart or failover since): the next script records a possible loss and claims start a horizon past it"
	}
	return []Result{r}
}

// missingRegistry names the keys of the registry (made by flaked init,
// restored by the fleet's nodes) that are missing: "" when none is.
func missingRegistry(k contract.Keys, meta map[string]string, layout string) string {
	switch {
	case meta[contract.MetaGeneration] == "" && layout == "":
		return k.Meta + " and " + k.Layout
	case meta[contract.MetaGeneration] == "":
		return k.Meta
	case layout == "":
		return k.Layout
	}
	return ""
}
