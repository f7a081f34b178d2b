package coord_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/internal/redistest"
)

// wantUnsafe fails unless err is guard.lua's refusal for check, naming
// each of words.
func wantUnsafe(t *testing.T, what string, err error, check string, words ...string) {
	t.Helper()
	got, ok := contract.UnsafeCheck(err)
	if !ok || got != check {
		t.Fatalf("%s: %v, want guard.lua's UNSAFE %s refusal", what, err, check)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not name %q", what, err, w)
		}
	}
}

// noRegistry fails if anything was written to the namespace.
func noRegistry(t *testing.T, admin redis.UniversalClient) {
	t.Helper()
	keys, err := admin.Keys(ctxT(t), "{flaked}:*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("a refused script wrote %v (%v)", keys, err)
	}
}

// Fault: the nodes' user may not run INFO replication (only
// +info|replication is granted: Redis refuses guard.lua's INFO server
// replication memory), or INFO is renamed. Read as an empty identity,
// one that never changes, the refusal would hide a failover to a replica
// that missed writes (the simulator's identity-silent mutation brings that
// back, and its teeth test finds duplicate IDs). Guard: claim and counter
// refuse and write nothing; the opt-in "none" runs.
func TestGuard_INFORefusedOrRenamed_ScriptsRefuse(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	admin := srv.Client(t)
	err := admin.Do(ctxT(t), "ACL", "SETUSER", "narrow", "on", ">pw", "~{flaked}:*", "-@all", "+eval", "+evalsha",
		"+get", "+set", "+del", "+exists", "+pexpire", "+hget", "+hmget", "+hset", "+hdel", "+sadd", "+srem",
		"+srandmember", "+xadd", "+time", "+info|replication").Err()
	if err != nil {
		t.Fatal(err)
	}
	narrow := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "narrow", Password: "pw"})
	t.Cleanup(func() { narrow.Close() })
	reg, err := coord.NewRegistry(narrow, coord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.Claim(ctxT(t), coord.ClaimOptions{})
	wantUnsafe(t, "claim under +info|replication", err, contract.UnsafeIdentity, "+info", "deploy/redis/acl.conf")
	c, err := fallback.New(narrow, fallback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.NextID(ctxT(t))
	wantUnsafe(t, "counter under +info|replication", err, contract.UnsafeIdentity, "+info")
	noRegistry(t, admin)

	renamed := redistest.Start(t, redistest.Options{Args: []string{"rename-command INFO flaked-hidden-info"}})
	reg, err = coord.NewRegistry(renamed.Client(t), coord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.Claim(ctxT(t), coord.ClaimOptions{})
	wantUnsafe(t, "claim with INFO renamed", err, contract.UnsafeIdentity, "rename-command INFO")
	noRegistry(t, renamed.Client(t))

	// The opt-in: no INFO read, flaked init and the claim are granted.
	if _, err := coord.Init(ctxT(t), renamed.Client(t), coord.Options{RedisIdentity: contract.IdentityNone, Horizon: time.Millisecond}); err != nil {
		t.Fatalf("flaked init with --redis-identity=none: %v", err)
	}
	reg, err = coord.NewRegistry(renamed.Client(t), coord.Options{RedisIdentity: contract.IdentityNone, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatalf("claim with --redis-identity=none: %v", err)
	}
	_ = l.Release(ctxT(t), l.Floor())
	if _, err := coord.NewRegistry(admin, coord.Options{RedisIdentity: "proxy"}); !errors.Is(err, coord.ErrInvalidOptions) {
		t.Fatalf("RedisIdentity \"proxy\": %v, want ErrInvalidOptions", err)
	}
}

// Fault: maxmemory-policy allkeys-lru set live on a Redis the fleet runs
// on (a cache moved in). Every writing script refuses from the next call:
// the renewal raises no reservation and extends no lease, the counter
// hands out nothing; set back, both resume. No ID is granted while the
// registry's keys may be evicted, so an evicted reservation can never be
// claimed below (what would repeat IDs).
func TestGuard_EvictionPolicySetLive_RefusedThenResumes(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client(t)
	reg := newReg(t, rdb, coord.Options{})
	l, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fallback.New(rdb, fallback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.NextID(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	setPolicy := func(p string) {
		t.Helper()
		if err := rdb.ConfigSet(ctxT(t), "maxmemory-policy", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy("allkeys-lru")
	granted := l.Granted()
	reserved, _ := rdb.HGet(ctxT(t), "{flaked}:reserved", strconv.Itoa(l.MachineIDs()[0])).Result()
	_, err = l.Reserve(ctxT(t), granted+500)
	wantUnsafe(t, "renewal under allkeys-lru", err, contract.UnsafeEviction, "allkeys-lru", "noeviction")
	if after, _ := rdb.HGet(ctxT(t), "{flaked}:reserved", strconv.Itoa(l.MachineIDs()[0])).Result(); after != reserved || l.Granted() != granted {
		t.Fatalf("a refused renewal moved the reservation: %s -> %s, granted %d -> %d", reserved, after, granted, l.Granted())
	}
	c2, err := fallback.New(rdb, fallback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.NextID(ctxT(t))
	wantUnsafe(t, "counter under allkeys-lru", err, contract.UnsafeEviction, "allkeys-lru")
	_, err = reg.Claim(ctxT(t), coord.ClaimOptions{})
	wantUnsafe(t, "claim under allkeys-lru", err, contract.UnsafeEviction, "allkeys-lru")

	setPolicy("volatile-lru") // allowed: only leases carry a TTL
	if _, err := l.Reserve(ctxT(t), granted+500); err != nil {
		t.Fatalf("renewal under volatile-lru: %v", err)
	}
	if _, err := c2.NextID(context.Background()); err != nil {
		t.Fatalf("counter under volatile-lru: %v", err)
	}
	if err := l.Release(ctxT(t), l.Granted()); err != nil {
		t.Fatal(err)
	}
}
