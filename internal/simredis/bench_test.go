package simredis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redistest"
)

// round is how many calls BenchmarkScript makes on one server before it
// turns to the other.
const round = 100

// BenchmarkScript is why simredis exists: the renewal script (guard.lua
// + renew.lua, as coord's Lease.Renew sends it) through a go-redis client
// on simredis and on miniredis, both in this process, rounds of calls
// alternating between the two so a noisy spell hits both (the garbage of
// miniredis's rounds is collected during simredis's too). miniredis serves over
// loopback TCP and builds a new Lua state for every EVAL; simredis calls
// the script in the Server's one Lua state, without a network. PING on
// the same miniredis client is the TCP round trip alone, so
// mini-µs/call minus ping-µs is miniredis's script cost. Run it with
//
//	go test -run '^$' -bench '^BenchmarkScript$' -benchtime 4000x -count 3 ./internal/simredis/
func BenchmarkScript(b *testing.B) {
	ctx := context.Background()
	sim := newRenewal(b, New(time.Now, nil).Client())
	_, mc := redistest.Mini(b)
	mini := newRenewal(b, mc)
	var simT, miniT, pingT time.Duration
	b.ReportAllocs()
	i := 0
	var simN, miniN int
	for b.Loop() {
		onMini := i/round%2 == 1 // rounds of round calls, alternating
		i++
		if !onMini {
			start := time.Now()
			sim.run(b)
			simT += time.Since(start)
			simN++
			continue
		}
		start := time.Now()
		mini.run(b)
		miniT += time.Since(start)
		start = time.Now()
		if err := mc.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		pingT += time.Since(start)
		miniN++
	}
	us := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(max(n, 1)) }
	b.ReportMetric(us(simT, simN), "sim-µs/call")
	b.ReportMetric(us(miniT, miniN), "mini-µs/call")
	b.ReportMetric(us(pingT, miniN), "mini-ping-µs")
	b.ReportMetric(us(miniT, miniN)/max(us(simT, simN), 0.001), "mini/sim")
}

// renewal is one lease on rdb, renewed again and again.
type renewal struct {
	rdb *redis.Client
	f   fleet
	l   *lease
}

func newRenewal(b *testing.B, rdb *redis.Client) *renewal {
	ctx := context.Background()
	f := newFleet("bench", time.Now)
	if err := redistest.InitRegistry(ctx, rdb, f.ns, f.layout); err != nil {
		b.Fatal(err)
	}
	l, err := f.claimLease(ctx, rdb, "00112233445566778899aabbccddeeff", 7)
	if err != nil {
		b.Fatal(err)
	}
	if v, err := f.renew(ctx, rdb, l, f.tick()); err != nil || v[0] != "OK" { // loads the script
		b.Fatalf("renew: %v %v", v, err)
	}
	return &renewal{rdb: rdb, f: f, l: l}
}

func (r *renewal) run(b *testing.B) {
	v, err := r.f.renew(context.Background(), r.rdb, r.l, r.f.tick()+100)
	if err != nil || v[0] != "OK" {
		b.Fatalf("renew: %v %v", v, err)
	}
}

// BenchmarkScriptDo runs the same renewal through Server.Do, without
// go-redis: what the script engine itself costs.
func BenchmarkScriptDo(b *testing.B) {
	s := New(time.Now, nil)
	rdb := s.Client()
	ctx := context.Background()
	f := newFleet("bench", time.Now)
	if err := redistest.InitRegistry(ctx, rdb, f.ns, f.layout); err != nil {
		b.Fatal(err)
	}
	l, err := f.claimLease(ctx, rdb, "00112233445566778899aabbccddeeff", 7)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.renew(ctx, rdb, l, f.tick()); err != nil { // loads the script
		b.Fatal(err)
	}
	str := func(n int64) string { return strconv.FormatInt(n, 10) }
	args := []string{"EVALSHA", renewScript.Hash(), "5",
		f.key("reserved"), f.key("events"), f.key("machines"), f.key("meta"), f.key("layout"),
		f.prefix(), l.token, str(f.tick() + 100), str(l.granted), str(f.ttlMs), str(f.maxLen), "flake", "host-a", "4242",
		"10.0.0.1:7000", "v1.2.3", f.layout, l.gen, str(f.horizon), str(f.epochUs), "10000", "node-1", l.lossID,
		str(l.horizon), "7"}
	b.ReportAllocs()
	for b.Loop() {
		v, err := s.Do(args)
		if err != nil || v.([]any)[0] != "OK" {
			b.Fatalf("renew: %v %v", v, err)
		}
	}
}

// BenchmarkNewServer is what a simulated server costs before its first
// script returns: New, the Lua state, a script call (compiled once per
// process, so not counted).
func BenchmarkNewServer(b *testing.B) {
	args := []string{"EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k", "v"}
	b.ReportAllocs()
	for b.Loop() {
		s := New(time.Now, nil)
		if _, err := s.Do(args); err != nil {
			b.Fatal(err)
		}
	}
}
