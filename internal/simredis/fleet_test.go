package simredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/scripts/lua"
)

// fleet calls flaked's scripts with the arguments coord and fallback
// build (coord/registry.go claimArgs, coord/lease.go renewLocked, release
// and Check, fallback/counter.go fetchSegment), without their waiting and
// retrying, so tests see every reply. Its layout is the default one:
// 10 ms ticks from 2025-01-01, 16 machine bits, 8 sequence bits.
type fleet struct {
	ns      string
	layout  string
	epochUs int64
	unitUs  float64
	horizon int64 // ticks
	ttlMs   int64
	maxLen  int64
	maxWait int64 // ticks
	settle  int64 // ms
	now     func() time.Time
}

func newFleet(ns string, now func() time.Time) fleet {
	return fleet{
		ns:      ns,
		layout:  "8/16/10ms/2025-01-01T00:00:00Z",
		epochUs: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
		unitUs:  10_000,
		horizon: 500,
		ttlMs:   10_000,
		maxLen:  100_000,
		maxWait: 200,
		settle:  4333,
		now:     now,
	}
}

var (
	claimScript   = redis.NewScript(lua.Claim)
	renewScript   = redis.NewScript(lua.Renew)
	releaseScript = redis.NewScript(lua.Release)
	checkScript   = redis.NewScript(lua.Check)
	counterScript = redis.NewScript(lua.Counter)
	pruneScript   = redis.NewScript(lua.Prune)
)

func (f fleet) prefix() string      { return "{" + f.ns + "}:" }
func (f fleet) key(k string) string { return f.prefix() + k }
func (f fleet) tick() int64 {
	return (f.now().UnixMicro() - f.epochUs) / int64(f.unitUs)
}

// lease is what an owner keeps between script calls.
type lease struct {
	token, gen, lossID string
	ids                []int
	granted, horizon   int64
}

// claimReq is claim.lua's per-call input beyond the fleet's.
type claimReq struct {
	token, gen, preferred, prevToken, node string
	localFloor                             int64
	taken                                  []int
	cands                                  []int
}

func (f fleet) claim(ctx context.Context, rdb redis.Scripter, r claimReq) ([]any, error) {
	if r.gen == "" {
		r.gen = "gen-" + r.token
	}
	taken := make([]string, len(r.taken))
	for i, id := range r.taken {
		taken[i] = strconv.Itoa(id)
	}
	args := []any{
		f.prefix(), r.token, f.layout, r.gen,
		f.horizon, f.tick(), f.ttlMs, f.maxLen,
		r.preferred, r.localFloor, f.maxWait,
		f.epochUs, f.unitUs, 65535,
		"host-a", 4242, "10.0.0.1:7000", "v1.2.3", "flake",
		strings.Join(taken, ","), r.prevToken, r.node, f.settle,
	}
	for _, c := range r.cands {
		args = append(args, c)
	}
	keys := []string{f.key("layout"), f.key("meta"), f.key("machines"), f.key("reserved"), f.key("events")}
	return claimScript.Run(ctx, rdb, keys, args...).Slice()
}

// claimLease claims one ID and returns the lease, as coord's Claim keeps
// it.
func (f fleet) claimLease(ctx context.Context, rdb redis.Scripter, token string, cands ...int) (*lease, error) {
	v, err := f.claim(ctx, rdb, claimReq{token: token, localFloor: -1, cands: cands})
	if err != nil {
		return nil, err
	}
	if v[0] != "OK" {
		return nil, fmt.Errorf("claim: %v", v)
	}
	id, _ := strconv.Atoi(fmt.Sprint(v[1]))
	return &lease{token: token, gen: fmt.Sprint(v[3]), lossID: fmt.Sprint(v[10]), ids: []int{id},
		granted: toInt(v[2]), horizon: max(toInt(v[9]), f.horizon)}, nil
}

func (f fleet) renew(ctx context.Context, rdb redis.Scripter, l *lease, want int64) ([]any, error) {
	args := []any{f.prefix(), l.token, want, l.granted, f.ttlMs, f.maxLen, "flake", "host-a", 4242,
		"10.0.0.1:7000", "v1.2.3", f.layout, l.gen, f.horizon, f.epochUs, f.unitUs, "node-1", l.lossID, l.horizon}
	for _, id := range l.ids {
		args = append(args, id)
	}
	keys := []string{f.key("reserved"), f.key("events"), f.key("machines"), f.key("meta"), f.key("layout")}
	v, err := renewScript.Run(ctx, rdb, keys, args...).Slice()
	if err == nil && v[0] == "OK" {
		l.granted = max(l.granted, toInt(v[1]))
		l.lossID = fmt.Sprint(v[5])
	}
	return v, err
}

func (f fleet) release(ctx context.Context, rdb redis.Scripter, l *lease, last int64) (any, error) {
	args := []any{f.prefix(), l.token, last, f.maxLen, "host-a", 4242, "10.0.0.1:7000", l.gen, f.epochUs, f.unitUs}
	for _, id := range l.ids {
		args = append(args, id)
	}
	return releaseScript.Run(ctx, rdb, []string{f.key("reserved"), f.key("events"), f.key("meta")}, args...).Result()
}

func (f fleet) check(ctx context.Context, rdb redis.Scripter, l *lease) (any, error) {
	args := []any{f.prefix(), l.token}
	for _, id := range l.ids {
		args = append(args, id)
	}
	return checkScript.Run(ctx, rdb, []string{f.key("machines")}, args...).Result()
}

func (f fleet) counter(ctx context.Context, rdb redis.Scripter, n int64, minValue string) (any, error) {
	keys := []string{f.key("counter"), f.key("layout"), f.key("events"), f.key("meta")}
	return counterScript.Run(ctx, rdb, keys, n, f.epochUs, f.unitUs, 8, 100, minValue, f.layout, f.maxLen,
		65535, "host-c", 99, "gen-counter", 0).Result()
}

func (f fleet) prune(ctx context.Context, rdb redis.Scripter, cutoff int64, pairs ...string) (any, error) {
	args := []any{f.prefix(), cutoff, "host-p", 7}
	for _, p := range pairs {
		args = append(args, p)
	}
	return pruneScript.Run(ctx, rdb, []string{f.key("machines"), f.key("reserved"), f.key("events")}, args...).Result()
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return -1
}
