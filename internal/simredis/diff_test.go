package simredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/internal/redistest"
)

// The differential tests run the same commands and scripts on a real
// redis-server and on a simredis Server whose clock is the real one, and
// compare replies and keyspaces after normalising what must differ:
// server identities, times, ticks and stream IDs (see norm). They skip
// when redis-server is not installed (and fail then under CI=true, as
// every test of the repository that needs one).

// SIMREDIS_DEBUG=1 logs what both servers replied at every step.
var debug = os.Getenv("SIMREDIS_DEBUG") != ""

// pair is one real server and one simulated server, with go-redis
// clients of both. The real client speaks RESP2, as the simulated one
// does, so raw replies (Do) have the same shapes.
type pair struct {
	real      *redistest.Server
	sim       *Server
	realC     *redis.Client
	simC      *redis.Client
	realFleet redis.UniversalClient // default client (RESP3), as the fleet's code gets
}

func newPair(t *testing.T) *pair {
	t.Helper()
	redistest.Require(t)
	// AOF (fsync always) so that a restart keeps the data and changes only
	// the identity, the case guard.lua exists for.
	real := redistest.Start(t, redistest.Options{AOF: true})
	p := &pair{real: real, sim: New(time.Now, rand.New(rand.NewPCG(3, 4)))}
	p.realC = redis.NewClient(&redis.Options{Addr: real.Addr(), Protocol: 2})
	t.Cleanup(func() { _ = p.realC.Close() })
	p.realFleet = real.Client(t)
	p.simC = p.sim.Client()
	return p
}

// both runs f on the real client, then on the simulated one, and compares
// the normalised results.
func (p *pair) both(t *testing.T, what string, f func(rdb *redis.Client) (any, error)) {
	t.Helper()
	rv, rerr := f(p.realC)
	sv, serr := f(p.simC)
	if debug {
		t.Logf("%s:\n  real %#v\n  sim  %#v", what, result(rv, rerr), result(sv, serr))
	}
	if r, s := norm(result(rv, rerr)), norm(result(sv, serr)); !reflect.DeepEqual(r, s) {
		t.Errorf("%s:\nredis-server %#v\nsimredis     %#v", what, r, s)
	}
}

// result folds an error into the value: errors compare by their text.
func result(v any, err error) any {
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "(nil)"
		}
		return "error: " + err.Error()
	}
	return v
}

// Patterns of what differs between two servers run a moment apart.
var (
	identityRE = regexp.MustCompile(`[0-9a-f]{40}:[0-9a-f]{40}`)
	shaRE      = regexp.MustCompile(`script: [0-9a-f]{40}`)
	streamIDRE = regexp.MustCompile(`^\d{10,}-\d+$`)
	bigRE      = regexp.MustCompile(`\d{9,}`)
)

// norm replaces server identities, stream IDs and numbers of 9 digits or
// more (milliseconds, ticks, reservations, counter values) by
// placeholders, recursively; numbers below that (counts, machine IDs,
// flags) stay.
func norm(v any) any {
	switch x := v.(type) {
	case string:
		x = identityRE.ReplaceAllString(x, "<server>")
		if streamIDRE.MatchString(x) {
			return "<stream-id>"
		}
		return bigRE.ReplaceAllString(x, "<n>")
	case int64:
		if x >= 100_000_000 || x <= -100_000_000 {
			return "<n>"
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = norm(e)
		}
		return out
	case map[string]string:
		out := map[string]any{}
		for k, e := range x {
			out[k] = norm(e)
		}
		return out
	}
	return v
}

// dump reads a keyspace through typed commands: every key with its type,
// whether it expires, and its value (hashes as maps, sets sorted, streams
// as their entries' fields).
func dump(ctx context.Context, rdb *redis.Client) (map[string]any, error) {
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, k := range keys {
		typ := rdb.Type(ctx, k).Val()
		var val any
		switch typ {
		case "string":
			val = rdb.Get(ctx, k).Val()
		case "hash":
			val = rdb.HGetAll(ctx, k).Val()
		case "set":
			m := rdb.SMembers(ctx, k).Val()
			slices.Sort(m)
			val = m
		case "stream":
			var entries []map[string]any
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				entries = append(entries, m.Values)
			}
			val = entries
		}
		ttl := "persistent"
		if rdb.PTTL(ctx, k).Val() >= 0 {
			ttl = "expires"
		}
		out[k] = []any{typ, ttl, normDeep(val)}
	}
	return out, nil
}

// dump is the package-level dump for the simulated server: the same
// shapes, read from its keyspace directly (it implements only the
// commands flaked sends, not TYPE, KEYS, SMEMBERS, XRANGE or PTTL).
func (s *Server) dump() map[string]any {
	out := map[string]any{}
	for _, k := range s.liveKeys() {
		typ := s.typeOf(k)
		var val any
		switch typ {
		case "string":
			val = s.get(k).str
		case "hash":
			val = s.hashAll(k)
		case "set":
			m := s.members(k)
			slices.Sort(m)
			val = m
		case "stream":
			_, val = s.streamEntries(k)
		}
		ttl := "persistent"
		if s.pttl(k) >= 0 {
			ttl = "expires"
		}
		out[k] = []any{typ, ttl, normDeep(val)}
	}
	return out
}

// normDeep is norm for the shapes dump reads.
func normDeep(v any) any {
	switch x := v.(type) {
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = norm(s)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, m := range x {
			n := map[string]any{}
			for k, e := range m {
				n[k] = norm(e)
			}
			out[i] = n
		}
		return out
	}
	return norm(v)
}

// sameKeyspace compares the two keyspaces.
func (p *pair) sameKeyspace(t *testing.T, when string) {
	t.Helper()
	ctx := context.Background()
	r, err := dump(ctx, p.realC)
	if err != nil {
		t.Fatal(err)
	}
	s := p.sim.dump()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r {
			if !yield(k) {
				return
			}
		}
		for k := range s {
			if _, ok := r[k]; !ok && !yield(k) {
				return
			}
		}
	}) {
		if !reflect.DeepEqual(r[k], s[k]) {
			t.Errorf("%s: key %s:\nredis-server %v\nsimredis     %v", when, k, r[k], s[k])
		}
	}
}

// TestDifferentialScripts runs the conversion cases of TestScriptReplies
// on both servers.
func TestDifferentialScripts(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	for _, c := range []*redis.Client{p.realC, p.simC} {
		c.HSet(ctx, "h", "a", "1")
	}
	for _, c := range scriptCases {
		args := []any{"EVAL", c.script}
		for _, a := range c.args {
			args = append(args, a)
		}
		rv, rerr := p.realC.Do(ctx, args...).Result()
		sv, serr := p.simC.Do(ctx, args...).Result()
		// The expectations of TestScriptReplies hold on the real server.
		t.Run(c.name+"/redis-server", func(t *testing.T) { checkScriptReply(t, rv, rerr, c) })
		r, s := result(rv, rerr), result(sv, serr)
		if c.name == "runtime error" { // the message is gopher-lua's own
			r, s = shaRE.ReplaceAllString(fmt.Sprint(r)[:27], ""), shaRE.ReplaceAllString(fmt.Sprint(s)[:27], "")
		}
		if !reflect.DeepEqual(r, s) {
			t.Errorf("%s:\nredis-server %#v\nsimredis     %#v", c.name, r, s)
		}
	}
	p.sameKeyspace(t, "after the script cases")
}

// TestDifferentialCommands runs plain commands on both servers: every
// command the simulator sends (recorded by the TestMain of sim/), in the
// forms flaked's scripts and Go code use, their error
// replies, and one command simredis does not implement.
func TestDifferentialCommands(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	for _, args := range [][]any{
		{"SET", "k", "v", "PX", "60000"}, {"GET", "k"}, {"SET", "k", "w", "NX"}, {"SET", "k", "w", "XX", "GET"},
		{"SET", "k", "x", "NX", "PX", "5"}, {"PEXPIRE", "k", "0"}, {"EXISTS", "k", "k"}, {"SET", "n", "10"},
		{"HSET", "h", "a", "1", "b", "2"}, {"HSET", "h", "a", "3", "c", "4"}, {"HMGET", "h", "a", "zz", "c"},
		{"HGET", "h", "b"}, {"HDEL", "h", "b", "zz"}, {"HGETALL", "h"}, {"HGET", "nope", "a"}, {"HGETALL", "nope"},
		{"SADD", "s", "5", "3", "9", "3"}, {"SISMEMBER", "s", "9"}, {"SISMEMBER", "s", "4"}, {"SISMEMBER", "nope", "4"},
		{"SRANDMEMBER", "nope", "3"}, {"SRANDMEMBER", "s", "0"}, {"SRANDMEMBER", "nope"},
		{"XADD", "x", "MAXLEN", "~", "1000", "*", "type", "claim", "mid", "7"}, {"XADD", "x", "*", "f", "v"},
		{"XADD", "x", "MAXLEN", "=", "1", "*", "type", "init"}, {"XADD", "x", "MAXLEN", "~", "-1", "*", "f", "v"},
		{"XADD", "x", "MAXLEN", "~", "x", "*", "f", "v"}, {"XADD", "x", "*", "f"},
		{"DEL", "h", "s", "nope"}, {"EXISTS", "h"},
		{"GET", "x"}, {"HGET", "k", "f"}, {"HSET", "n", "f", "v"}, {"SADD", "n", "m"}, {"SISMEMBER", "n", "m"}, {"XADD", "n", "*", "f", "v"},
		{"NOPE", "a"}, {"GET"}, {"SET", "k", "v", "PX", "0"}, {"SET", "k", "v", "EX", "x"}, {"HSET", "h", "a"}, {"WAIT", "0"},
		{"EVALSHA", strings.Repeat("ab", 20), "0"}, {"EVAL", "return 1", "x"}, {"EVAL", "return 1", "-1"},
		{"EVAL", "return 1", "3", "a"}, {"EVAL", "return 1", "0"}, {"EVALSHA", sha1hex("return 1"), "0"},
		{"WAIT", "0", "0"}, {"SADD", "s2", "b", "a"}, {"EXISTS", "s2"},
		{"PEXPIRE", "n", "1000", "XX"}, {"PEXPIRE", "n", "1000", "NX"}, {"PEXPIRE", "n", "500", "GT"}, {"PEXPIRE", "n", "500", "LT"},
		{"PEXPIRE", "n", "5", "NX", "XX"}, {"PEXPIRE", "n", "5", "FOO"}, {"PEXPIRE", "nope", "5"},
	} {
		p.both(t, fmt.Sprint(args), func(rdb *redis.Client) (any, error) { return rdb.Do(ctx, args...).Result() })
	}
	// SRANDMEMBER with a count covering the set returns all of it; in an
	// order of Redis's own (an intset's is sorted), so compare sorted.
	p.both(t, "SRANDMEMBER s2 10", func(rdb *redis.Client) (any, error) {
		m, err := rdb.SRandMemberN(ctx, "s2", 10).Result()
		slices.Sort(m)
		return fmt.Sprint(m), err
	})
	p.sameKeyspace(t, "after the commands")
}

// TestDifferentialRegistry runs flaked's scripts on both servers with the
// arguments coord and fallback build, through one scenario: a claim on an
// namespace without a registry (refused), claims with a preferred ID and with a previous token,
// renewals, reservations, checks, a lost renewal, release, re-assertion,
// counter segments, prune, and a restart that changes the server's
// identity.
func TestDifferentialRegistry(t *testing.T) {
	p := newPair(t)
	r := &diffRun{t: t, p: p, ctx: context.Background(), leases: map[*redis.Client]map[string]*lease{p.realC: {}, p.simC: {}}}
	f := newFleet("diff", time.Now)
	r.registryLifecycle(f)
	r.afterRestart(f)
	r.counterSegments(newFleet("diffc", time.Now))
	r.noRegistry(newFleet("diffs", time.Now))
}

// The owner tokens of TestDifferentialRegistry.
const tokA, tokB, tokC = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccc"

// diffRun runs the steps of a scenario on both servers of a pair, each
// client with its own owners' leases, and compares the keyspaces after
// every step.
type diffRun struct {
	t      *testing.T
	p      *pair
	ctx    context.Context
	leases map[*redis.Client]map[string]*lease
}

// diffStep is one step on one server: rdb and its owners' leases by name.
type diffStep func(rdb *redis.Client, l map[string]*lease) (any, error)

func (r *diffRun) step(what string, f diffStep) {
	r.t.Helper()
	r.p.both(r.t, what, func(rdb *redis.Client) (any, error) { return f(rdb, r.leases[rdb]) })
	r.p.sameKeyspace(r.t, "after "+what)
}

// renew is the step renewing owner name's lease, reserving ahead ticks.
func (r *diffRun) renew(f fleet, name string, ahead int64) diffStep {
	return func(rdb *redis.Client, l map[string]*lease) (any, error) {
		v, err := f.renew(r.ctx, rdb, l[name], f.tick()+ahead)
		return v, err
	}
}

// leaseOf is the lease a claim's reply v grants token, on machine IDs ids.
func leaseOf(f fleet, token string, v []any, ids []int) *lease {
	return &lease{token: token, gen: fmt.Sprint(v[3]), lossID: fmt.Sprint(v[10]), ids: ids, granted: toInt(v[2]), horizon: f.horizon}
}

// registryLifecycle: claims, renewals, checks, a takeover by a restarted
// node, a second claimer, a release, lost renewals and a prune.
func (r *diffRun) registryLifecycle(f fleet) {
	ctx := r.ctx
	r.step("claim on a namespace without a registry", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		// Only flaked init makes one: a caller that never ran under it
		// is refused (NOREGISTRY), before any write.
		return f.claim(ctx, rdb, claimReq{token: tokA, stranger: true, localFloor: -1, cands: []int{5, 9}})
	})
	r.step("flaked init (a new fleet)", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		return nil, redistest.InitRegistry(ctx, rdb, f.ns, f.layout)
	})
	r.step("claim of the preferred ID", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		v, err := f.claim(ctx, rdb, claimReq{token: tokA, preferred: "5", localFloor: -1, node: "node-1", cands: []int{5, 9}})
		if err == nil {
			l["a"] = leaseOf(f, tokA, v, []int{5})
		}
		return v, err
	})
	r.step("renewal", r.renew(f, "a", 0))
	r.step("reservation ahead", r.renew(f, "a", 300))
	r.step("check", func(rdb *redis.Client, l map[string]*lease) (any, error) { return f.check(ctx, rdb, l["a"]) })
	r.step("check with another token", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		return f.check(ctx, rdb, &lease{token: tokB, ids: []int{5}})
	})
	r.step("lost renewal: the lease is held by another owner", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		return f.renew(ctx, rdb, &lease{token: tokB, gen: l["a"].gen, lossID: l["a"].lossID, ids: []int{5}, horizon: f.horizon}, f.tick())
	})
	r.step("claim with the previous token (a restarted node)", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		v, err := f.claim(ctx, rdb, claimReq{token: tokB, preferred: "5", prevToken: tokA, node: "node-1",
			localFloor: l["a"].granted, cands: []int{5, 9}})
		if err == nil {
			l["b"] = leaseOf(f, tokB, v, []int{5})
		}
		return v, err
	})
	r.step("the old owner is fenced", r.renew(f, "a", 0))
	r.step("a second claimer gets another ID", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		// Its preferred ID is held: the script takes the free one it prefers
		// next, whatever its floor, and writes a clone check for the first.
		v, err := f.claim(ctx, rdb, claimReq{token: tokC, preferred: "9", localFloor: -1, node: "node-2", cands: []int{9, 11}})
		if err == nil && v[0] == "OK" {
			l["c"] = leaseOf(f, tokC, v, []int{int(toInt(v[1]))})
		}
		return v, err
	})
	r.step("release", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		return f.release(ctx, rdb, l["b"], f.tick())
	})
	r.step("renewal after release re-asserts", r.renew(f, "b", 0))
	r.step("lost renewal: the reservation moved", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		rdb.Del(ctx, f.key("lease:5"))
		rdb.HSet(ctx, f.key("reserved"), "5", l["b"].granted+1000)
		return f.renew(ctx, rdb, l["b"], f.tick())
	})
}

// afterRestart: a restart (with its data: AOF) changes the run_id: the
// next script records a possible loss and an owner's missing lease is not
// re-asserted under a loss ID it did not see.
func (r *diffRun) afterRestart(f fleet) {
	if err := r.p.realC.Ping(r.ctx).Err(); err != nil {
		r.t.Fatal(err)
	}
	r.p.real.Restart(r.t)
	r.p.sim.Restart(r.p.sim.Snapshot())
	r.step("renewal after a restart", r.renew(f, "c", 0))
	r.step("missing lease after a restart", func(rdb *redis.Client, l map[string]*lease) (any, error) {
		rdb.Del(r.ctx, f.key(fmt.Sprintf("lease:%d", l["c"].ids[0])))
		l["c"].lossID = "server-before-the-restart@1"
		return f.renew(r.ctx, rdb, l["c"], f.tick())
	})
}

// counterSegments: the counter, on a namespace whose registry lost
// nothing.
func (r *diffRun) counterSegments(g fleet) {
	ctx := r.ctx
	for _, c := range []*redis.Client{r.p.realC, r.p.simC} {
		if err := redistest.ForgetLoss(ctx, c, g.ns); err != nil {
			r.t.Fatal(err)
		}
	}
	r.step("counter: a new counter starts a lead ahead", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		return g.counter(ctx, rdb, 64, "0", "0")
	})
	time.Sleep(30 * time.Millisecond) // a tick or more: the counter is within its lead again
	r.step("counter segment", func(rdb *redis.Client, _ map[string]*lease) (any, error) { return g.counter(ctx, rdb, 64, "0", "0") })
	r.step("counter segment above a floor", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		return g.counter(ctx, rdb, 10, "390624999999", "255")
	})
	r.step("counter: bad floor", func(rdb *redis.Client, _ map[string]*lease) (any, error) { return g.counter(ctx, rdb, 10, "x", "0") })
}

// noRegistry: on a namespace without a registry, a claim and a counter
// call of callers that never ran under it are refused (NOREGISTRY); a
// claim of one that did restores {ns}:meta and the layout, and a counter
// of another layout is then refused.
func (r *diffRun) noRegistry(h fleet) {
	r.step("counter of a stranger", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		return h.counterAs(r.ctx, rdb, "", 10, "0", "0")
	})
	r.step("claim restoring the registry", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		return h.claim(r.ctx, rdb, claimReq{token: tokA, preferred: "1", localFloor: -1, cands: []int{1}})
	})
	r.step("counter of another layout", func(rdb *redis.Client, _ map[string]*lease) (any, error) {
		g := h
		g.layout = "time=39,seq=7,machine=17,tick=10ms,epoch=2025-01-01T00:00:00Z"
		return g.counter(r.ctx, rdb, 10, "0", "0")
	})
}

// TestDifferentialFleet drives flaked's real coord and fallback packages
// on both servers and compares what they leave in Redis.
func TestDifferentialFleet(t *testing.T) {
	p := newPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, side := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"redis-server", p.realFleet}, {"simredis", p.simC}} {
		reg, err := coord.NewRegistry(side.rdb, coord.Options{Namespace: "fleet",
			Owner: coord.Owner{Host: "host-a", PID: 4242, Addr: "10.0.0.1:7000", Version: "v1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := redistest.InitRegistry(ctx, side.rdb, "fleet", reg.Layout().String()); err != nil {
			t.Fatal(err)
		}
		lease, err := reg.Claim(ctx, coord.ClaimOptions{Count: 2})
		if err != nil {
			t.Fatalf("%s: claim: %v", side.name, err)
		}
		tick := reg.Layout().Tick(time.Now())
		if _, err := lease.Reserve(ctx, tick+100); err != nil {
			t.Fatalf("%s: reserve: %v", side.name, err)
		}
		if err := lease.Renew(ctx); err != nil {
			t.Fatalf("%s: renew: %v", side.name, err)
		}
		if ok, err := lease.Check(ctx); !ok || err != nil {
			t.Fatalf("%s: check: %v %v", side.name, ok, err)
		}
		if err := lease.Release(ctx, tick); err != nil {
			t.Fatalf("%s: release: %v", side.name, err)
		}
		c, err := fallback.New(side.rdb, fallback.Options{Namespace: "fleet", Host: "host-c", PID: 99})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.NextID(ctx); err != nil {
			t.Fatalf("%s: counter: %v", side.name, err)
		}
		_ = c.Close()
	}
	// The claimed IDs are random: compare the keyspaces with them
	// replaced.
	ids := regexp.MustCompile(`(lease|owner):\d+$`)
	shape := func(d map[string]any, err error) map[string]any {
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]any{}
		for k, v := range d {
			if k == "{fleet}:reserved" || k == "{fleet}:machines" { // keyed by the random IDs
				v = v.([]any)[:2]
			}
			k = ids.ReplaceAllString(k, "$1:<id>")
			out[k] = normIDs(v)
		}
		return out
	}
	r, s := shape(dump(ctx, p.realC)), shape(p.sim.dump(), nil)
	if debug {
		t.Logf("real %v", r)
	}
	if !reflect.DeepEqual(r, s) {
		t.Errorf("keyspaces differ:\nredis-server %v\nsimredis     %v", r, s)
	}
}

// normIDs blanks the machine IDs and random tokens in the events and
// owner hashes of TestDifferentialFleet.
func normIDs(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normIDs(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if k == "mid" || k == "token" || k == "from_token" || k == "prev_token" || k == "fenced" {
				e = "<x>"
			}
			out[k] = normIDs(e)
		}
		return out
	}
	return v
}
