package simredis

import (
	"context"
	"errors"
	"net"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

func TestClientCommands(t *testing.T) {
	c := newClock()
	s := newServer(c, 1)
	rdb := s.Client()
	defer rdb.Close()
	f := clientRun{t: t, ctx: context.Background(), c: c, s: s, rdb: rdb}
	f.stringKeys()
	f.hashes()
	f.sets()
	f.streams()
	f.serverInfo()
	f.keyspace()
	f.errorReplies()
}

// clientRun sends commands through the simulated client of server s,
// whose clock is c, and checks what go-redis reads of the replies.
type clientRun struct {
	t   *testing.T
	ctx context.Context
	c   *clock
	s   *Server
	rdb *redis.Client
}

// check fails the test on err or a reply other than want.
func (f clientRun) check(what string, got, want any, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Errorf("%s: %v", what, err)
	} else if !reflect.DeepEqual(got, want) {
		f.t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func (f clientRun) stringKeys() {
	ctx, rdb := f.ctx, f.rdb
	ok, err := rdb.SetNX(ctx, "k", "v", time.Second).Result()
	f.check("SET NX PX", ok, true, err)
	ok, err = rdb.SetNX(ctx, "k", "v", time.Second).Result() // nil reply: false, no error
	f.check("SET NX PX again", ok, false, err)
	old, err := rdb.SetArgs(ctx, "k", 42, redis.SetArgs{Get: true, KeepTTL: true}).Result()
	f.check("SET GET KEEPTTL", old, "v", err)
	f.check("expiry kept", f.s.pttl("k"), time.Second, nil)
	_, err = rdb.Get(ctx, "missing").Result()
	if !errors.Is(err, redis.Nil) {
		f.t.Errorf("GET missing: %v, want redis.Nil", err)
	}
	got, err := rdb.Get(ctx, "k").Result()
	f.check("GET", got, "42", err)
	b, err := rdb.PExpire(ctx, "k", 5*time.Second).Result()
	f.check("PEXPIRE", b, true, err)
	f.check("PEXPIRE's expiry", f.s.pttl("k"), 5*time.Second, nil)
}

func (f clientRun) hashes() {
	ctx, rdb := f.ctx, f.rdb
	n, err := rdb.HSet(ctx, "h", "a", 1, "b", true, "c", 2.5).Result()
	f.check("HSET", n, int64(3), err)
	m, err := rdb.HGetAll(ctx, "h").Result()
	f.check("HGETALL", m, map[string]string{"a": "1", "b": "1", "c": "2.5"}, err)
	vals, err := rdb.HMGet(ctx, "h", "a", "zz").Result()
	f.check("HMGET", vals, []any{"1", nil}, err)
	v, err := rdb.HGet(ctx, "h", "c").Result()
	f.check("HGET", v, "2.5", err)
	n, err = rdb.HDel(ctx, "h", "c", "zz").Result()
	f.check("HDEL", n, int64(1), err)
}

func (f clientRun) sets() {
	ctx, rdb := f.ctx, f.rdb
	rdb.SAdd(ctx, "s", 3, 1, 2)
	f.check("members", f.s.members("s"), []string{"3", "1", "2"}, nil)
	is, err := rdb.SIsMember(ctx, "s", 2).Result()
	f.check("SISMEMBER", is, true, err)
	rm, err := rdb.SRandMemberN(ctx, "s", 5).Result()
	f.check("SRANDMEMBER 5", len(rm), 3, err)
}

func (f clientRun) streams() {
	ctx, rdb := f.ctx, f.rdb
	id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "st", MaxLen: 100, Approx: true, Values: []any{"type", "claim", "mid", 7}}).Result()
	f.check("XADD", id, strconv.FormatInt(f.c.t.UnixMilli(), 10)+"-0", err)
	ids, values := f.s.streamEntries("st")
	f.check("the stream", []any{ids, values}, []any{[]string{id}, []map[string]any{{"type": "claim", "mid": "7"}}}, nil)
}

func (f clientRun) serverInfo() {
	ctx, rdb := f.ctx, f.rdb
	tm, err := rdb.Time(ctx).Result()
	f.check("TIME", tm.UnixMicro(), f.c.t.UnixMicro(), err)
	text, err := rdb.Info(ctx, "server").Result()
	if err != nil || !strings.Contains(text, "run_id:"+f.s.RunID()) {
		f.t.Errorf("INFO server = %q, %v", text, err)
	}
	im, err := rdb.InfoMap(ctx, "replication").Result()
	f.check("INFO map", im["Replication"]["master_replid"], f.s.ReplID(), err)
}

// keyspace runs last: it expects the keys the others wrote.
func (f clientRun) keyspace() {
	ctx, rdb := f.ctx, f.rdb
	f.check("keys", f.s.liveKeys(), []string{"h", "k", "s", "st"}, nil)
	n, err := rdb.Del(ctx, "h", "s", "nope").Result()
	f.check("DEL", n, int64(2), err)
	n, err = rdb.Exists(ctx, "h", "k").Result()
	f.check("EXISTS", n, int64(1), err)
}

// errorReplies: error replies are redis.Error values with Redis's text.
func (f clientRun) errorReplies() {
	err := f.rdb.HGet(f.ctx, "k", "f").Err()
	if !redis.HasErrorPrefix(err, "WRONGTYPE") {
		f.t.Errorf("HGET on a string: %v", err)
	}
	err = f.rdb.Do(f.ctx, "NOPE", 1).Err()
	if !redis.HasErrorPrefix(err, "unknown command 'NOPE'") { // HasErrorPrefix skips "ERR "
		f.t.Errorf("unknown command: %v", err)
	}
}

// TestClientScripts runs go-redis's Script: EVALSHA, NOSCRIPT, EVAL.
func TestClientScripts(t *testing.T) {
	s := newServer(newClock(), 1)
	rdb := s.Client()
	ctx := context.Background()
	script := redis.NewScript(contract.Check)
	if s.scripts[script.Hash()] != nil {
		t.Fatal("a new server knows the script")
	}
	rdb.Set(ctx, "{ns}:lease:1", "tok", 0)
	keys, argv := contract.CheckArgs{Keys: contract.NewKeys("ns"), Token: "tok", MachineIDs: []int{1}}.KeysArgv()
	n, err := script.Run(ctx, rdb, keys, argv...).Int()
	if err != nil || n != 1 {
		t.Fatalf("check.lua = %d, %v", n, err)
	}
	st := s.Stats()
	if st.ScriptCalls != 1 || st.ScriptCommands != 1 {
		t.Errorf("after EVALSHA (NOSCRIPT) then EVAL: %+v", st)
	}
	keys, argv = contract.CheckArgs{Keys: contract.NewKeys("ns"), Token: "other", MachineIDs: []int{1}}.KeysArgv()
	n, _ = script.Run(ctx, rdb, keys, argv...).Int()
	if n != 0 || s.Stats().ScriptCalls != 2 {
		t.Errorf("second run: %d, %+v", n, s.Stats())
	}
	if s.scripts[script.Hash()] == nil {
		t.Error("EVAL did not cache the script")
	}
}

func TestClientPipelines(t *testing.T) {
	s := newServer(newClock(), 1)
	rdb := s.Client()
	ctx := context.Background()
	rdb.HSet(ctx, "h", "f", "v")

	var get *redis.StringCmd
	var all *redis.MapStringStringCmd
	var tm *redis.TimeCmd
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "v", 0)
		get = p.Get(ctx, "k")
		all = p.HGetAll(ctx, "h")
		tm = p.Time(ctx)
		return nil
	})
	if err != nil || len(cmds) != 4 || get.Val() != "v" || all.Val()["f"] != "v" || tm.Val().IsZero() {
		t.Errorf("TxPipelined: %v %v %v %v %v", cmds, err, get, all, tm)
	}
	// As with go-redis on a server, a pipeline returns its first error,
	// redis.Nil included, and runs every command.
	var after *redis.IntCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "missing")
		after = p.HSet(ctx, "n", "f", "v")
		return nil
	})
	if !errors.Is(err, redis.Nil) || after.Val() != 1 {
		t.Errorf("Pipelined: %v, HSET %v", err, after)
	}
}

// TestClientFailures: errors of do that are not replies reach the
// commands as they are; a done context sends nothing.
func TestClientFailures(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	calls := 0
	rdb := NewClient(func(ctx context.Context, args []string) (any, error) {
		calls++
		if args[0] == "get" {
			return nil, refused
		}
		return []any{}, nil
	})
	ctx := context.Background()
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, refused) {
		t.Errorf("GET: %v, want the error of do", err)
	}
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "k")
		p.Ping(ctx)
		return nil
	})
	if !errors.Is(err, refused) || !errors.Is(cmds[1].Err(), refused) {
		t.Errorf("pipeline: %v, %v", err, cmds)
	}
	// A type this package does not convert says so.
	err = rdb.ZRangeWithScores(ctx, "z", 0, -1).Err()
	if err == nil || !strings.Contains(err.Error(), "*redis.ZSliceCmd") {
		t.Errorf("ZRANGE WITHSCORES: %v", err)
	}
	before := calls
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := rdb.Ping(cctx).Err(); !errors.Is(err, context.Canceled) || calls != before {
		t.Errorf("PING on a done context: %v, do called %d times", err, calls-before)
	}
}

// TestClientNoGoroutines: the client dials nothing and starts no
// goroutine, however many commands it runs.
func TestClientNoGoroutines(t *testing.T) {
	s := newServer(newClock(), 1)
	ctx := context.Background()
	before := runtime.NumGoroutine()
	for range 20 {
		rdb := s.Client()
		for i := range 100 {
			rdb.Set(ctx, "k", i, 0)
			rdb.Get(ctx, "k")
			rdb.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"n"})
		}
		_, _ = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Time(ctx)
			p.HGetAll(ctx, "h")
			return nil
		})
		if st := rdb.PoolStats(); st.TotalConns != 0 || st.Misses != 0 {
			t.Errorf("pool stats %+v: a connection was made", st)
		}
		_ = rdb.Close()
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines: %d before, %d after", before, after)
	}
}

func TestWireArgs(t *testing.T) {
	n := 7
	var nilInt *int
	when := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	got, err := wireArgs([]any{"s", []byte("b"), 1, int64(-2), uint8(3), 1.5, float32(0.25), 1e21, true, false,
		nil, &n, nilInt, time.Second, when, net.IP{1, 2}})
	want := []string{"s", "b", "1", "-2", "3", "1.5", "0.25", "1000000000000000000000", "1", "0",
		"", "7", "0", "1000000000", "2025-01-02T03:04:05.000000006Z", "\x01\x02"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("wireArgs = %q, %v\nwant %q", got, err, want)
	}
	if _, err := wireArgs([]any{struct{}{}}); err == nil || !strings.Contains(err.Error(), "can't marshal struct {}") {
		t.Errorf("a struct: %v", err)
	}
}
