package simredis

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"
)

// TestScriptReplies checks both conversions: the replies scripts get from
// redis.call, and the replies made of what scripts return. The expected
// values are what redis-server 7.0 answers (TestDifferential runs the
// same cases against one).
func TestScriptReplies(t *testing.T) {
	s := newServer(newClock(), 1)
	do(t, s, "HSET", "h", "a", "1")
	for _, c := range scriptCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Do(append([]string{"EVAL", c.script}, c.args...))
			checkScriptReply(t, got, err, c)
		})
	}
}

type scriptCase struct {
	name   string
	script string
	args   []string // numkeys key... arg...
	want   any      // the reply, or
	err    string   // the start of the error reply
}

// scriptCases run with the hash h = {a = 1}.
var scriptCases = []scriptCase{
	{name: "array stops at nil; numbers truncated", script: "return {1, 2.7, -2.7, 'a', nil, 3}", args: []string{"0"},
		want: []any{int64(1), int64(2), int64(-2), "a"}},
	{name: "false in an array is nil", script: "return {1, false, 3}", args: []string{"0"}, want: []any{int64(1), nil, int64(3)}},
	{name: "nested", script: "return {1, {2, {'x'}}, {}}", args: []string{"0"},
		want: []any{int64(1), []any{int64(2), []any{"x"}}, []any{}}},
	{name: "status table", script: "return {ok = 'fine'}", args: []string{"0"}, want: "fine"},
	{name: "status_reply", script: "return redis.status_reply('PONG')", args: []string{"0"}, want: "PONG"},
	{name: "error_reply without code", script: "return redis.error_reply('oops')", args: []string{"0"}, err: "ERR oops"},
	{name: "error_reply with code", script: "return redis.error_reply('MY err')", args: []string{"0"}, err: "MY err"},
	{name: "error table", script: "return {err = 'XX yy'}", args: []string{"0"}, err: "XX yy"},
	{name: "true", script: "return true", args: []string{"0"}, want: int64(1)},
	{name: "false", script: "return false", args: []string{"0"}, want: nil},
	{name: "nil", script: "return nil", args: []string{"0"}, want: nil},
	{name: "negative truncation", script: "return -3.99", args: []string{"0"}, want: int64(-3)},
	{name: "KEYS and ARGV", script: "return {#KEYS, #ARGV, KEYS[2], ARGV[1]}", args: []string{"2", "k1", "k2", "a1"},
		want: []any{int64(2), int64(1), "k2", "a1"}},
	{name: "HMGET nil is false", script: "local r = redis.call('HMGET', KEYS[1], 'a', 'zz'); return {r[1], tostring(r[2])}",
		args: []string{"1", "h"}, want: []any{"1", "false"}},
	{name: "nil bulk is false", script: "return redis.call('GET', 'nope') == false", args: []string{"0"}, want: int64(1)},
	{name: "integer is a number", script: "return redis.call('HSET', KEYS[1], 'x', 'y') + 0.5 > 1", args: []string{"1", "h"}, want: int64(1)},
	{name: "status is {ok}", script: "local r = redis.call('SET', 'k', 'v'); return type(r) .. r.ok", args: []string{"0"},
		want: "tableOK"},
	{name: "pcall returns {err}", script: "local r = redis.pcall('GET', KEYS[1]); return {type(r), r.err}", args: []string{"1", "h"},
		want: []any{"table", "WRONGTYPE Operation against a key holding the wrong kind of value"}},
	{name: "pcall error returned", script: "return redis.pcall('GET', KEYS[1])", args: []string{"1", "h"},
		err: "WRONGTYPE Operation against a key holding the wrong kind of value"},
	{name: "call raises", script: "redis.call('GET', KEYS[1])", args: []string{"1", "h"},
		err: "WRONGTYPE Operation against a key holding the wrong kind of value script: "},
	{name: "Lua pcall catches call", script: "local ok, e = pcall(redis.call, 'GET', KEYS[1]); return {tostring(ok), type(e), e}",
		args: []string{"1", "h"}, want: []any{"false", "string", "WRONGTYPE Operation against a key holding the wrong kind of value"}},
	{name: "re-raised", script: "local ok, e = pcall(redis.call, 'GET', KEYS[1]); error(e)", args: []string{"1", "h"},
		err: "ERR user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value script: "},
	{name: "call raises on line 3", script: "local a = 1\nlocal b = 2\nreturn redis.call('GET', KEYS[1])", args: []string{"1", "h"},
		err: "WRONGTYPE Operation against a key holding the wrong kind of value script: "},
	{name: "unknown command", script: "return redis.call('NOPE')", args: []string{"0"}, err: "ERR Unknown Redis command called from script"},
	{name: "wrong arity", script: "return redis.call('GET')", args: []string{"0"}, err: "ERR Wrong number of args calling Redis command from script"},
	{name: "no arguments", script: "return redis.call()", args: []string{"0"}, err: "ERR Please specify at least one argument for this redis lib call"},
	{name: "bad argument type", script: "return redis.call('GET', {})", args: []string{"0"}, err: "ERR Lua redis lib command arguments must be strings or integers"},
	{name: "not from scripts", script: "return redis.call('EVAL', 'return 1', 0)", args: []string{"0"}, err: "ERR This Redis command is not allowed from script"},
	{name: "numbers as arguments", script: "redis.call('SET', 'n1', 1.7e15); redis.call('SET', 'n2', 0.1); redis.call('SET', 'n3', 1e17); " +
		"redis.call('SET', 'n4', -42); return {redis.call('GET', 'n1'), redis.call('GET', 'n2'), redis.call('GET', 'n3'), redis.call('GET', 'n4')}",
		args: []string{"0"}, want: []any{"1700000000000000", "0.10000000000000001", "1e+17", "-42"}},
	{name: "new global refused", script: "x = 1", args: []string{"0"}, err: "ERR user_script:1: Attempt to modify a readonly table script: "},
	{name: "missing global refused", script: "return y", args: []string{"0"},
		err: "ERR user_script:1: Script attempted to access nonexistent global variable 'y' script: "},
	{name: "no os", script: "return os", args: []string{"0"}, err: "ERR user_script:1: Script attempted to access nonexistent global variable 'os'"},
	{name: "runtime error", script: "local t = nil\nreturn t.x", args: []string{"0"}, err: "ERR user_script:2: "},
	{name: "error()", script: "error('boom')", args: []string{"0"}, err: "ERR user_script:1: boom script: "},
	{name: "math.random is Redis's", script: "return {math.random(1000), math.random(1000), math.random(5, 10)}", args: []string{"0"},
		want: []any{int64(397), int64(841), int64(7)}},
	{name: "string library", script: "return {string.format('%d-%s', 3, 'x'), string.match('run_id:ab12\\r\\n', 'run_id:(%w+)'), " +
		"string.match('x:\\r\\nx:y', 'x:(%w+)'), string.rep('ab', 2), ('abc'):upper(), string.find('123', '^%d+$')}",
		args: []string{"0"}, want: []any{"3-x", "ab12", "y", "abab", "ABC", int64(1), int64(3)}},
	{name: "table library and unpack", script: "local t = {} table.insert(t, 'a') table.insert(t, 'b') return {table.concat(t, ','), select('#', unpack(t))}",
		args: []string{"0"}, want: []any{"a,b", int64(2)}},
	{name: "TIME", script: "local t = redis.call('TIME'); return {type(t[1]), type(t[2])}", args: []string{"0"}, want: []any{"string", "string"}},
	{name: "INFO through pcall", script: "return type(string.match(redis.pcall('INFO', 'server'), 'run_id:(%w+)'))", args: []string{"0"}, want: "string"},
}

func checkScriptReply(t *testing.T, got any, err error, c scriptCase) {
	t.Helper()
	if c.err != "" {
		var re redis.Error
		if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("got %#v, %v; want the error reply %q...", got, err, c.err)
		}
		return
	}
	if err != nil && !(c.want == nil && errors.Is(err, redis.Nil)) {
		t.Fatalf("error %v, want %#v", err, c.want)
	}
	if !reflect.DeepEqual(got, c.want) {
		t.Errorf("got %#v, want %#v", got, c.want)
	}
}

func TestScriptState(t *testing.T) {
	s := newServer(newClock(), 1)
	// KEYS and ARGV are replaced at every call.
	want(t, s, int64(2), "EVAL", "return #KEYS", "2", "a", "b")
	want(t, s, int64(0), "EVAL", "return #KEYS + #ARGV", "0")
	// math.random goes on across calls, from lrand48's initial state, as
	// on a fresh redis-server; randomseed sets it.
	want(t, s, int64(397), "EVAL", "return math.random(1000)", "0")
	want(t, s, int64(841), "EVAL", "return math.random(1000)", "0")
	want(t, s, int64(171), "EVAL", "math.randomseed(0) return math.random(1000)", "0")
	s.Restart(nil)
	want(t, s, int64(397), "EVAL", "return math.random(1000)", "0")

	// EVAL caches the script for EVALSHA (any case); a restart forgets it.
	want(t, s, "y", "EVAL", "return ARGV[1]", "0", "y")
	sha := sha1hex("return ARGV[1]")
	want(t, s, "x", "EVALSHA", sha, "0", "x")
	want(t, s, "x", "EVALSHA", strings.ToUpper(sha), "0", "x")
	wantErr(t, s, "NOSCRIPT", "EVALSHA", sha1hex("nope"), "0")
	s.Restart(nil)
	wantErr(t, s, "NOSCRIPT", "EVALSHA", sha, "0")
	wantErr(t, s, "ERR Error compiling script", "EVAL", "return 'x", "0")

	st := s.Stats()
	if st.ScriptCalls != 9 || st.ScriptCommands != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestFormatNumber(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 5: "5", -2.5: "-2.5", 1.7e15: "1700000000000000", 1e17: "1e+17", 0.1: "0.10000000000000001",
		123456789012345678: "1.2345678901234568e+17", 1e-5: "1.0000000000000001e-05",
	} {
		if got := formatNumber(f); got != want {
			t.Errorf("formatNumber(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestFastMatch(t *testing.T) {
	for _, c := range []struct {
		s, lit string
		class  byte
		want   string
	}{
		{"# Server\r\nrun_id:abc123\r\n", "run_id:", 'w', "abc123"},
		{"run_id:\r\nrun_id:x", "run_id:", 'w', "x"}, // the first occurrence followed by a word
		{"aab", "ab", 'w', ""},
		{"nothing", "run_id:", 'w', ""},
		{"k::v", "k:", 'w', ""},
		{"k:::v", "::", 'w', "v"},
		{"connected_slaves:12\r\n", "connected_slaves:", 'd', "12"},
		{"n:x1 n:2", "n:", 'd', "2"},
	} {
		got, ok := fastMatch(c.s, c.lit, c.class)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("fastMatch(%q, %q, %c) = %q, %v; want %q", c.s, c.lit, c.class, got, ok, c.want)
		}
	}
	for p, ok := range map[string]bool{"run_id:(%w+)": true, "(%w+)": false, "a.b(%w+)": false, "x%w(%w+)": false, "a(%d+)": true, "a(%s+)": false} {
		if _, _, got := literalThenRun(p); got != ok {
			t.Errorf("literalThenRun(%q) = %v", p, got)
		}
	}
	for p, want := range map[string][]string{"slave%d+:ip=([^,]*),port=(%d+)": {"slave", ":ip=", ",port="}, "ab*c": {"a", "c"},
		"%d+%.%d+": {"."}, "x%-?y": {"x", "y"}, "[a]": nil, "(%d+)-(%d+)": nil, "%bxy": nil, "a[b": nil, "state=on(line)": {"state=on", "line"}} {
		if got := requiredLiterals(p); !reflect.DeepEqual(got, want) {
			t.Errorf("requiredLiterals(%q) = %q, want %q", p, got, want)
		}
	}
}

// The wrapped string.match and string.gmatch answer what gopher-lua's own
// do, on the scripts' patterns and on INFO texts with and without what
// they look for.
func TestWrappedMatchAgreesWithGopherLua(t *testing.T) {
	subjects := []string{"", "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=7001,state=online,offset=5,lag=0\r\nslave1:ip=::1,port=7002,state=wait_bgsave\r\nmaster_replid:ab12\r\n",
		"# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", "maxmemory_policy:allkeys-lru\r\n", "a:b:c", "5,9,11", "1-2,30-40", "run_id:\r\nrun_id:x"}
	patterns := []string{"run_id:(%w+)", "master_replid:(%w+)", "connected_slaves:(%d+)", "slave%d+:ip=([^,]*),port=(%d+),state=(%w+)",
		"maxmemory_policy:([%w-]+)", ":(%w+)$", "[^,]+", "(%d+)-(%d+)", "^%d+$", "ab*", "x?y", "role:m%a+", "ip=%d+%.%d+",
		"a%-b", "lru$", "s?lave", "[%]x]", "%bab", "state=on(line)", ",l-ag", "master[_%-]repl"}
	plain := lua.NewState()
	defer plain.Close()
	e := newEngine(newServer(newClock(), 1))
	run := func(L *lua.LState, src string) string {
		t.Helper()
		if err := L.DoString(src); err != nil {
			t.Fatal(err)
		}
		v := L.Get(-1)
		L.Pop(1)
		return v.String()
	}
	for _, subj := range subjects {
		for _, p := range patterns {
			src := fmt.Sprintf(`local s, p = %q, %q
				local m = string.match(s, p)
				local out = tostring(m)
				for a, b, c in string.gmatch(s, p) do out = out .. "|" .. tostring(a) .. "," .. tostring(b) .. "," .. tostring(c) end
				return out`, subj, p)
			if want, got := run(plain, src), run(e.L, src); got != want {
				t.Errorf("%q on %q: simredis %q, gopher-lua %q", p, subj, got, want)
			}
		}
	}
}
