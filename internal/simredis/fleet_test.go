package simredis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

// fleet calls flaked's scripts with arguments as coord and fallback build
// them (the contract.ClaimArgs, RenewArgs, ReleaseArgs, CheckArgs and PruneArgs
// they use; counter.lua's by hand, so a test can send it a malformed
// floor), without their waiting and retrying, so tests see every reply.
// Its layout is the default one: 10 ms ticks from 2025-01-01, 16 machine
// bits, 8 sequence bits.
type fleet struct {
	ns      string
	layout  string
	epochUs int64
	unitUs  float64
	horizon int64 // ticks
	ttlMs   int64
	maxLen  int64
	maxWait int64 // ticks
	now     func() time.Time
}

func newFleet(ns string, now func() time.Time) fleet {
	return fleet{
		ns:      ns,
		layout:  "time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z",
		epochUs: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
		unitUs:  10_000,
		horizon: 500,
		ttlMs:   10_000,
		maxLen:  100_000,
		maxWait: 200,
		now:     now,
	}
}

var (
	claimScript   = redis.NewScript(contract.Claim)
	renewScript   = redis.NewScript(contract.Renew)
	releaseScript = redis.NewScript(contract.Release)
	checkScript   = redis.NewScript(contract.Check)
	counterScript = redis.NewScript(contract.Counter)
)

func (f fleet) keys() contract.Keys { return contract.NewKeys(f.ns) }
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
	// stranger: a caller that never ran under the registry (no
	// generation), refused on a namespace without one (NOREGISTRY).
	stranger   bool
	localFloor int64
	taken      []int
	cands      []int
}

func (f fleet) claim(ctx context.Context, rdb redis.Scripter, r claimReq) ([]any, error) {
	if r.gen == "" && !r.stranger {
		r.gen = "gen-" + r.token
	}
	keys, argv := contract.ClaimArgs{
		Keys: f.keys(), Token: r.token, Layout: f.layout, Generation: r.gen,
		Horizon: f.horizon, Now: f.tick(), LeaseTTLMs: f.ttlMs, EventsMaxLen: f.maxLen,
		Preferred: r.preferred, LocalFloor: r.localFloor, MaxWait: f.maxWait,
		EpochUs: f.epochUs, TickUs: f.unitUs, CounterID: 65535,
		Host: "host-a", PID: 4242, Addr: "10.0.0.1:7000", Version: "v1.2.3", Mode: "flake",
		Skip: r.taken, PrevToken: r.prevToken, Node: r.node,
		MinID: 0, MaxID: 65534, // no regions: the whole space but the counter ID
		Candidates: r.cands,
	}.KeysArgv()
	return claimScript.Run(ctx, rdb, keys, argv...).Slice()
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
	keys, argv := contract.RenewArgs{
		Keys: f.keys(), Token: l.token, Want: want, Held: l.granted, LeaseTTLMs: f.ttlMs, EventsMaxLen: f.maxLen,
		Mode: "flake", Host: "host-a", PID: 4242, Addr: "10.0.0.1:7000", Version: "v1.2.3",
		Layout: f.layout, Generation: l.gen, Horizon: f.horizon, EpochUs: f.epochUs, TickUs: f.unitUs,
		Node: "node-1", LossID: l.lossID, FleetHorizon: l.horizon, MachineIDs: l.ids,
	}.KeysArgv()
	v, err := renewScript.Run(ctx, rdb, keys, argv...).Slice()
	if err == nil && v[0] == "OK" {
		l.granted = max(l.granted, toInt(v[1]))
		l.lossID = fmt.Sprint(v[5])
	}
	return v, err
}

func (f fleet) release(ctx context.Context, rdb redis.Scripter, l *lease, last int64) (any, error) {
	keys, argv := contract.ReleaseArgs{
		Keys: f.keys(), Token: l.token, LastTick: last, EventsMaxLen: f.maxLen, Host: "host-a", PID: 4242,
		Addr: "10.0.0.1:7000", Generation: l.gen, EpochUs: f.epochUs, TickUs: f.unitUs, MachineIDs: l.ids,
	}.KeysArgv()
	return releaseScript.Run(ctx, rdb, keys, argv...).Result()
}

func (f fleet) check(ctx context.Context, rdb redis.Scripter, l *lease) (any, error) {
	keys, argv := contract.CheckArgs{Keys: f.keys(), Token: l.token, MachineIDs: l.ids}.KeysArgv()
	return checkScript.Run(ctx, rdb, keys, argv...).Result()
}

// counter runs counter.lua with the floor (minTick, minSeq), as a caller
// that ran under the registry (it restores a missing one).
func (f fleet) counter(ctx context.Context, rdb redis.Scripter, n int64, minTick, minSeq string) (any, error) {
	return f.counterAs(ctx, rdb, "gen-counter", n, minTick, minSeq)
}

// counterAs runs counter.lua sending generation gen ("": a caller that
// never ran under the registry).
func (f fleet) counterAs(ctx context.Context, rdb redis.Scripter, gen string, n int64, minTick, minSeq string) (any, error) {
	keys := []string{f.key("counter"), f.key("layout"), f.key("events"), f.key("meta")}
	// By hand, not contract.CounterArgs: the floor may be a value that is not
	// a number ("counter: bad floor").
	return counterScript.Run(ctx, rdb, keys, "n", n, "epochUs", f.epochUs, "tickUs", f.unitUs, "bits", 8, "lead", 100,
		"minTick", minTick, "minSeq", minSeq, "layout", f.layout, "maxlen", f.maxLen, "counterID", 65535,
		"host", "host-c", "pid", 99, "generation", gen, "identity", contract.IdentityInfo).Result()
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
