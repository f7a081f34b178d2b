package simredis

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clock is a virtual clock for tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time               { return c.t }
func (c *clock) advance(d time.Duration)      { c.t = c.t.Add(d) }
func newClock() *clock                        { return &clock{t: time.UnixMilli(1_750_000_000_000)} }
func newServer(c *clock, seed uint64) *Server { return New(c.now, rand.New(rand.NewPCG(seed, seed))) }

// do runs one command and fails the test on anything but a reply.
func do(t *testing.T, s *Server, args ...string) any {
	t.Helper()
	v, err := s.Do(args)
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("%q: %v", args, err)
	}
	return v
}

// want runs a command and compares its reply.
func want(t *testing.T, s *Server, expect any, args ...string) {
	t.Helper()
	if got := do(t, s, args...); !reflect.DeepEqual(got, expect) {
		t.Errorf("%q = %#v, want %#v", args, got, expect)
	}
}

// wantTTL checks a key's time to live (PTTL's -1 and -2 included).
func wantTTL(t *testing.T, s *Server, key string, want time.Duration) {
	t.Helper()
	if got := s.pttl(key); got != want {
		t.Errorf("%s expires in %v, want %v", key, got, want)
	}
}

// wantErr runs a command and checks its error reply starts with prefix.
func wantErr(t *testing.T, s *Server, prefix string, args ...string) {
	t.Helper()
	v, err := s.Do(args)
	var re redis.Error
	if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("%q = %#v, %v; want an error reply %q...", args, v, err, prefix)
	}
}

func TestExpiry(t *testing.T) {
	c := newClock()
	s := newServer(c, 1)
	want(t, s, "OK", "SET", "k", "v", "PX", "100")
	wantTTL(t, s, "k", 100*time.Millisecond)
	c.advance(100 * time.Millisecond)
	want(t, s, "v", "GET", "k") // Redis: expired only when now > expiry
	wantTTL(t, s, "k", 0)
	c.advance(time.Millisecond)
	want(t, s, nil, "GET", "k")
	want(t, s, int64(0), "EXISTS", "k")
	wantTTL(t, s, "k", -2)
	if n := s.Stats().Keys; n != 0 {
		t.Errorf("Stats().Keys = %d after expiry, want 0", n)
	}

	want(t, s, int64(0), "PEXPIRE", "missing", "100")
	want(t, s, "OK", "SET", "k", "1", "EX", "10")
	wantTTL(t, s, "k", 10*time.Second)
	want(t, s, "1", "SET", "k", "2", "KEEPTTL", "GET") // keeps the expiry
	wantTTL(t, s, "k", 10*time.Second)
	want(t, s, "OK", "SET", "k", "2") // drops it
	wantTTL(t, s, "k", -1)
	want(t, s, int64(1), "PEXPIRE", "k", "500")
	want(t, s, int64(0), "PEXPIRE", "k", "100", "GT")
	want(t, s, int64(1), "PEXPIRE", "k", "100", "LT")
	wantTTL(t, s, "k", 100*time.Millisecond)
	want(t, s, int64(1), "PEXPIRE", "k", "0") // a time not in the future deletes
	want(t, s, int64(0), "EXISTS", "k")

	// Expired keys are invisible to every command, also those that do not
	// read the value.
	want(t, s, int64(1), "HSET", "h", "f", "v")
	want(t, s, int64(1), "PEXPIRE", "h", "5")
	c.advance(6 * time.Millisecond)
	if typ, keys := s.typeOf("h"), s.liveKeys(); typ != "none" || len(keys) != 0 {
		t.Errorf("an expired key: type %s, keys %v", typ, keys)
	}
	want(t, s, int64(1), "HSET", "h", "g", "v") // a new hash, without the old field
	want(t, s, []any{"g", "v"}, "HGETALL", "h")
}

func TestWrongType(t *testing.T) {
	s := newServer(newClock(), 1)
	do(t, s, "HSET", "h", "f", "v")
	do(t, s, "SET", "s", "v")
	for _, args := range [][]string{
		{"GET", "h"}, {"HGET", "s", "f"}, {"HSET", "s", "f", "v"}, {"HMGET", "s", "f"}, {"HDEL", "s", "f"},
		{"HGETALL", "s"}, {"SADD", "h", "m"}, {"SISMEMBER", "s", "m"}, {"SRANDMEMBER", "h", "2"},
		{"XADD", "h", "*", "f", "v"}, {"SET", "h", "v", "GET"},
	} {
		v, err := s.Do(args)
		if !redis.HasErrorPrefix(err, "WRONGTYPE") || err.Error() != string(errWrongType) {
			t.Errorf("%q = %#v, %v; want WRONGTYPE", args, v, err)
		}
	}
	want(t, s, "OK", "SET", "h", "v") // SET overwrites any type
}

func TestErrors(t *testing.T) {
	s := newServer(newClock(), 1)
	wantErr(t, s, "ERR unknown command 'FOO', with args beginning with: 'a' 'b' ", "FOO", "a", "b")
	wantErr(t, s, "ERR wrong number of arguments for 'get' command", "get")
	wantErr(t, s, "ERR wrong number of arguments for 'hset' command", "HSET", "h", "f")
	wantErr(t, s, "ERR syntax error", "SET", "k", "v", "NX", "XX")
	wantErr(t, s, "ERR invalid expire time in 'set' command", "SET", "k", "v", "PX", "0")
	wantErr(t, s, "ERR value is not an integer or out of range", "PEXPIRE", "k", "1.5")
	wantErr(t, s, "NOSCRIPT No matching script. Please use EVAL.", "EVALSHA", strings.Repeat("0", 40), "0")
	wantErr(t, s, "ERR Number of keys can't be greater than number of args", "EVAL", "return 1", "2", "k")
	wantErr(t, s, "ERR simredis: XADD takes MAXLEN and the ID * only", "XADD", "x", "1-1", "f", "v")
	wantErr(t, s, "ERR unknown command 'INCR'", "INCR", "n") // not sent by the simulator: not implemented
}

func TestStrings(t *testing.T) {
	s := newServer(newClock(), 1)
	want(t, s, nil, "SET", "k", "a", "XX")
	want(t, s, "OK", "SET", "k", "a", "NX")
	want(t, s, nil, "SET", "k", "b", "NX")
	want(t, s, "a", "SET", "k", "b", "GET")
	want(t, s, "b", "GET", "k")
	want(t, s, "OK", "SET", "n", "3")
	want(t, s, int64(2), "DEL", "k", "n", "missing")
}

func TestHashes(t *testing.T) {
	s := newServer(newClock(), 1)
	want(t, s, int64(3), "HSET", "h", "b", "1", "a", "2", "c", "3")
	want(t, s, int64(1), "HSET", "h", "a", "20", "d", "4") // one new field
	want(t, s, []any{"b", "1", "a", "20", "c", "3", "d", "4"}, "HGETALL", "h")
	want(t, s, []any{"20", nil, "4"}, "HMGET", "h", "a", "zz", "d")
	want(t, s, []any{nil, nil}, "HMGET", "missing", "a", "b")
	want(t, s, int64(2), "HDEL", "h", "a", "zz", "b")
	want(t, s, []any{"c", "3", "d", "4"}, "HGETALL", "h")
	want(t, s, int64(1), "HSET", "h", "e", "5")
	want(t, s, int64(2), "HDEL", "h", "c", "d")
	want(t, s, int64(1), "HDEL", "h", "e")
	want(t, s, int64(0), "EXISTS", "h") // an emptied hash is deleted
	want(t, s, []any{}, "HGETALL", "h")

	// Past indexFrom fields the index takes over; order and deletes hold.
	var fields []any
	for i := range 40 {
		f := string(rune('A' + i))
		do(t, s, "HSET", "big", f, f)
		fields = append(fields, f)
	}
	do(t, s, "HDEL", "big", "C", "Z")
	fields = slices.DeleteFunc(fields, func(f any) bool { return f == "C" || f == "Z" })
	var got []any
	for i, f := range do(t, s, "HGETALL", "big").([]any) {
		if i%2 == 0 {
			got = append(got, f)
		}
	}
	if !reflect.DeepEqual(got, fields) {
		t.Errorf("fields after deletes: %v, want %v", got, fields)
	}
	want(t, s, "Y", "HGET", "big", "Y")
	want(t, s, nil, "HGET", "big", "Z")
}

func TestSRandMember(t *testing.T) {
	draw := func(seed uint64) []any {
		s := newServer(newClock(), seed)
		for _, m := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"} {
			do(t, s, "SADD", "s", m)
		}
		var out []any
		for _, n := range []string{"3", "8", "-5", "2"} {
			out = append(out, do(t, s, "SRANDMEMBER", "s", n))
		}
		return append(out, do(t, s, "SRANDMEMBER", "s"))
	}
	a, b := draw(7), draw(7)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different draws:\n%v\n%v", a, b)
	}
	if c := draw(8); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 7 and 8 drew the same: %v", a)
	}
	for i, n := range []int{3, 8} {
		got := a[i].([]any)
		seen := map[any]bool{}
		for _, m := range got {
			seen[m] = true
		}
		if len(got) != n || len(seen) != n {
			t.Errorf("SRANDMEMBER s %d = %v: want %d distinct members", n, got, n)
		}
	}
	if got := a[2].([]any); len(got) != 5 {
		t.Errorf("SRANDMEMBER s -5 = %v: want 5 members", got)
	}

	s := newServer(newClock(), 1)
	do(t, s, "SADD", "s", "b", "a", "c")
	want(t, s, []any{"b", "a", "c"}, "SRANDMEMBER", "s", "8") // all, in set order
	want(t, s, []any{}, "SRANDMEMBER", "missing", "8")
	want(t, s, nil, "SRANDMEMBER", "missing")
	want(t, s, int64(1), "SISMEMBER", "s", "c")
	want(t, s, int64(0), "SISMEMBER", "s", "d")
	if m := s.members("s"); !reflect.DeepEqual(m, []string{"b", "a", "c"}) {
		t.Errorf("members %v", m)
	}
}

func TestStreams(t *testing.T) {
	c := newClock()
	s := newServer(c, 1)
	ms := c.t.UnixMilli()
	want(t, s, itoa(ms)+"-0", "XADD", "st", "*", "a", "1")
	want(t, s, itoa(ms)+"-1", "XADD", "st", "*", "b", "2") // the clock did not move
	c.advance(-time.Second)
	want(t, s, itoa(ms)+"-2", "XADD", "st", "*", "c", "3") // nor does it go back
	c.advance(2 * time.Second)
	want(t, s, itoa(ms+1000)+"-0", "XADD", "st", "MAXLEN", "=", "3", "*", "d", "4")
	ids, vals := s.streamEntries("st")
	if !reflect.DeepEqual(ids, []string{itoa(ms) + "-1", itoa(ms) + "-2", itoa(ms+1000) + "-0"}) || vals[0]["b"] != "2" {
		t.Errorf("after MAXLEN = 3: %v %v", ids, vals)
	}

	for range 250 {
		do(t, s, "XADD", "big", "MAXLEN", "~", "100", "*", "f", "v")
	}
	if ids, _ := s.streamEntries("big"); len(ids) < 100 || len(ids) >= 200 {
		t.Errorf("%d entries after MAXLEN ~ 100, want 100..199", len(ids))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestSnapshotIsolation(t *testing.T) {
	c := newClock()
	s := newServer(c, 1)
	do(t, s, "SET", "str", "old", "PX", "60000")
	do(t, s, "HSET", "h", "f", "old")
	do(t, s, "SADD", "set", "a")
	do(t, s, "XADD", "st", "*", "f", "old")
	snap := s.Snapshot()

	// Every kind of write after the snapshot leaves it as it was.
	do(t, s, "SET", "str", "new")
	do(t, s, "HSET", "h", "f", "new", "g", "new")
	do(t, s, "SADD", "set", "b")
	do(t, s, "XADD", "st", "*", "f", "new")
	do(t, s, "DEL", "st")
	do(t, s, "SET", "extra", "x")

	check := func(r *Server) {
		t.Helper()
		want(t, r, "old", "GET", "str")
		wantTTL(t, r, "str", time.Minute) // absolute expiry kept
		want(t, r, []any{"f", "old"}, "HGETALL", "h")
		if m := r.members("set"); !reflect.DeepEqual(m, []string{"a"}) {
			t.Errorf("set members %v", m)
		}
		if ids, _ := r.streamEntries("st"); len(ids) != 1 {
			t.Errorf("stream entries %v", ids)
		}
		want(t, r, int64(0), "EXISTS", "extra")
	}
	r := newServer(c, 2)
	r.Restart(snap)
	check(r)
	// Writes on a server that loaded the snapshot do not reach it either.
	do(t, r, "HSET", "h", "f", "changed")
	do(t, r, "SADD", "set", "z")
	do(t, r, "XADD", "st", "*", "f", "changed")
	r2 := newServer(c, 3)
	r2.Load(snap)
	check(r2)
	// Nor do the master's writes reach what the replica loaded.
	do(t, s, "HSET", "h", "f", "again")
	want(t, r, "changed", "HGET", "h", "f")

	// A key that expires while the server is down is gone after a restart
	// from the snapshot: expiry times are absolute.
	c.advance(61 * time.Second)
	r.Restart(snap)
	want(t, r, int64(0), "EXISTS", "str")
	if n := snap.Len(); n != 4 {
		t.Errorf("snapshot holds %d keys %v, want 4", n, snap.Keys())
	}
}

func TestIdentity(t *testing.T) {
	s := newServer(newClock(), 1)
	run, repl := s.RunID(), s.ReplID()
	if len(run) != 40 || len(repl) != 40 || run == repl {
		t.Fatalf("run_id %q, master_replid %q", run, repl)
	}
	info := do(t, s, "INFO").(string)
	for _, want := range []string{"# Server\r\nrun_id:" + run + "\r\n", "# Replication\r\nmaster_replid:" + repl + "\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if server := do(t, s, "INFO", "server").(string); strings.Contains(server, "master_replid") || !strings.Contains(server, run) {
		t.Errorf("INFO server:\n%s", server)
	}

	do(t, s, "EVAL", "return 1", "0")
	sha := sha1hex("return 1")
	do(t, s, "SET", "k", "v")
	s.Promote(nil)
	if s.RunID() != run || s.ReplID() == repl {
		t.Errorf("Promote: run_id %q -> %q, replid %q -> %q; want the same run_id, a new replid", run, s.RunID(), repl, s.ReplID())
	}
	want(t, s, "v", "GET", "k")
	wantErr(t, s, "NOSCRIPT", "EVALSHA", sha, "0")
	if info := do(t, s, "INFO", "replication").(string); !strings.Contains(info, s.ReplID()) {
		t.Errorf("INFO after Promote shows the old replid:\n%s", info)
	}

	do(t, s, "EVAL", "return 1", "0")
	repl = s.ReplID()
	s.Restart(nil)
	if s.RunID() == run || s.ReplID() == repl {
		t.Error("Restart kept the identity")
	}
	want(t, s, int64(0), "EXISTS", "k")
	wantErr(t, s, "NOSCRIPT", "EVALSHA", sha, "0")

	// The same seed gives the same identities.
	if a, b := newServer(newClock(), 9), newServer(newClock(), 9); a.RunID() != b.RunID() {
		t.Error("identities differ for one seed")
	}
}
