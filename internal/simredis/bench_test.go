package simredis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redistest"
)

// BenchmarkScript runs the renewal script (guard.lua + renew.lua, as
// coord's Lease.Renew sends it) through a go-redis client, on simredis
// and on miniredis over TCP. Run it with
//
//	go test -run XXX -bench Script -benchtime 2000x -count 3 ./internal/simredis/
func BenchmarkScript(b *testing.B) {
	b.Run("simredis", func(b *testing.B) {
		benchRenew(b, New(time.Now, nil).Client())
	})
	b.Run("miniredis", func(b *testing.B) {
		_, c := redistest.Mini(b)
		benchRenew(b, c)
	})
}

func benchRenew(b *testing.B, rdb *redis.Client) {
	ctx := context.Background()
	f := newFleet("bench", time.Now)
	if err := redistest.ForgetLoss(ctx, rdb, f.ns); err != nil {
		b.Fatal(err)
	}
	l, err := f.claimLease(ctx, rdb, "00112233445566778899aabbccddeeff", 7)
	if err != nil {
		b.Fatal(err)
	}
	if v, err := f.renew(ctx, rdb, l, f.tick()); err != nil || v[0] != "OK" { // loads the script
		b.Fatalf("renew: %v %v", v, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := f.renew(ctx, rdb, l, f.tick()+100)
		if err != nil || v[0] != "OK" {
			b.Fatalf("renew: %v %v", v, err)
		}
	}
}

// BenchmarkScriptDo runs the same renewal through Server.Do, without
// go-redis: what the script engine itself costs.
func BenchmarkScriptDo(b *testing.B) {
	s := New(time.Now, nil)
	rdb := s.Client()
	ctx := context.Background()
	f := newFleet("bench", time.Now)
	if err := redistest.ForgetLoss(ctx, rdb, f.ns); err != nil {
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
