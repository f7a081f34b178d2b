package simredis

// The script engine: gopher-lua with Redis 7.0's scripting semantics for
// what flaked's scripts (contract) use. One Lua state per Server,
// made at its first script call and reused by every call after (KEYS and
// ARGV replaced each time); scripts compiled once per process (protos).
//
// Known divergences from Redis 7.0:
//
//   - Number formatting: Redis's Lua 5.1 formats tostring(n) and n .. ""
//     with "%.14g", so 1.7e15 prints "1.7e+15" and 123456789012345 prints
//     "1.2345678901234e+14"; gopher-lua prints integral numbers exactly
//     ("1700000000000000") and others in Go's shortest form (0.1 as "0.1",
//     as Lua does). flaked's scripts only tostring (or concatenate)
//     millisecond times and ticks, below 1e14, which print the same both
//     ways; not emulated. Numbers passed to redis.call are formatted as
//     Redis 7.0 does, "%.17g" (1.7e15 -> "1700000000000000", 0.1 ->
//     "0.10000000000000001", 1e17 -> "1e+17").
//   - Libraries: base, string, math and table. No cjson, cmsgpack, bit,
//     struct or coroutine, which Redis has and none of the scripts uses;
//     os, io and debug are absent as in Redis, and so are the globals
//     Redis removes (print, dofile, loadfile, require, module, getfenv,
//     setfenv, newproxy).
//   - Only the globals table is protected (creating a global fails with
//     "Attempt to modify a readonly table", reading a missing one with
//     "Script attempted to access nonexistent global variable"); Redis
//     also makes string, math, table, redis... read-only.
//   - Errors: redis.call raises the error reply's text, a string (what a
//     Lua pcall around it gets, as in Redis 7.0); redis.pcall returns
//     {err = ...}. A script failing with a redis.call error, or with a
//     runtime error, gets Redis's reply text, ending " script: <sha>, on
//     @user_script:<line>."; one failing with an error table of its own
//     (error({err = ...})) lacks that suffix. Runtime messages are
//     gopher-lua's ("attempt to index a non-table object(nil) with key
//     'x'" where Lua 5.1 says "attempt to index local 't' (a nil
//     value)"), with the same "user_script:<line>:" position.
//   - redis.setresp(3) is refused (scripts get RESP2 replies only);
//     redis.set_repl and redis.replicate_commands are accepted and do
//     nothing; redis.log discards; redis.breakpoint, redis.debug and
//     redis.acl_check_cmd are absent.
//   - No time limit (BUSY, SCRIPT KILL) and no memory limit.
//   - math.random is Redis 7.0's: the 48-bit generator of lrand48, one
//     sequence per server process from lrand48's initial state, not
//     reseeded per script (Redis 7 dropped that with script
//     replication), so a fresh server draws the numbers a fresh
//     redis-server draws.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// engine is one Server's Lua state.
type engine struct {
	s       *Server
	L       *lua.LState
	globals *lua.LTable
	args    []string // the arguments of the current redis.call, reused
	sha     string   // the running script, for error texts

	// raised is the last error redis.call raised, and raisedLine the
	// script line of that call: when the script fails with it, the error
	// reply keeps its code and names the line, as Redis's.
	raised     string
	raisedLine int
	// errored is the last string the script's error() raised, and
	// erroredLine the line of that call: a text raised at level 0 holds no
	// position, and Redis's error handler names the caller's line.
	errored     string
	erroredLine int

	cov *lua.LTable // branch counters of covered scripts (coverage.go)
}

func newEngine(s *Server) *engine {
	L := lua.NewState(lua.Options{
		SkipOpenLibs: true,
		// Lua 5.1's limit of nested calls (LUAI_MAXCCALLS). The scripts
		// hold a few dozen values: the data stack grows on demand instead
		// of taking gopher-lua's default 5120 slots in every server.
		CallStackSize:    200,
		RegistrySize:     1024,
		RegistryMaxSize:  1 << 20,
		RegistryGrowStep: 1024,
	})
	e := &engine{s: s, L: L, globals: L.G.Global}
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, name := range []string{"print", "dofile", "loadfile", "require", "module", "getfenv", "setfenv",
		"newproxy", "_printregs", "_GOPHER_LUA_VERSION"} {
		e.globals.RawSetString(name, lua.LNil)
	}
	wrapMatch(L)
	e.globals.RawSetString("error", L.NewFunction(e.luaError))
	mathLib := L.GetGlobal("math").(*lua.LTable)
	mathLib.RawSetString("random", L.NewFunction(e.mathRandom))
	mathLib.RawSetString("randomseed", L.NewFunction(e.mathRandomSeed))
	e.globals.RawSetString("redis", e.redisModule())
	L.SetMetatable(e.globals, e.globalsGuard())
	return e
}

// redisModule builds the redis table, once per state.
func (e *engine) redisModule() *lua.LTable {
	L := e.L
	r := L.NewTable()
	fn := func(name string, f lua.LGFunction) { r.RawSetString(name, L.NewFunction(f)) }
	num := func(name string, n int) { r.RawSetString(name, lua.LNumber(n)) }
	fn("call", func(L *lua.LState) int { return e.call(L, true) })
	fn("pcall", func(L *lua.LState) int { return e.call(L, false) })
	fn("error_reply", func(L *lua.LState) int {
		L.Push(errorTable(L, normalizeError(L.CheckString(1))))
		return 1
	})
	fn("status_reply", func(L *lua.LState) int {
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	})
	fn("sha1hex", func(L *lua.LState) int {
		L.Push(lua.LString(sha1hex(L.CheckString(1))))
		return 1
	})
	fn("log", func(*lua.LState) int { return 0 })
	fn("setresp", func(L *lua.LState) int {
		if L.CheckInt(1) != 2 {
			L.RaiseError("simredis: only RESP2 replies are supported in scripts")
		}
		return 0
	})
	fn("set_repl", func(*lua.LState) int { return 0 })
	fn("replicate_commands", func(L *lua.LState) int {
		L.Push(lua.LTrue)
		return 1
	})
	num("LOG_DEBUG", 0)
	num("LOG_VERBOSE", 1)
	num("LOG_NOTICE", 2)
	num("LOG_WARNING", 3)
	num("REPL_NONE", 0)
	num("REPL_AOF", 1)
	num("REPL_SLAVE", 2)
	num("REPL_REPLICA", 2)
	num("REPL_ALL", 3)
	r.RawSetString("REDIS_VERSION", lua.LString(Version))
	num("REDIS_VERSION_NUM", 0x07000f)
	return r
}

// globalsGuard is the metatable that makes the globals table behave as
// Redis 7's: scripts cannot create globals (which would also leak into
// the next script sharing this state) nor read missing ones.
func (e *engine) globalsGuard() *lua.LTable {
	L := e.L
	mt := L.NewTable()
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.Get(2).String())
		return 0
	}))
	return mt
}

// run runs a compiled script and returns its reply.
func (e *engine) run(sha string, p *lua.FunctionProto, keys, argv []string) any {
	L := e.L
	e.sha, e.raised, e.raisedLine, e.errored, e.erroredLine = sha, "", 0, "", 0
	e.covTable()
	e.globals.RawSetString("KEYS", stringTable(L, keys)) // raw: the guard refuses new globals
	e.globals.RawSetString("ARGV", stringTable(L, argv))
	L.Push(L.NewFunctionFromProto(p))
	err := L.PCall(0, 1, nil)
	defer L.SetTop(0)
	if err != nil {
		return e.failure(err)
	}
	return fromLua(L.Get(-1))
}

// call is redis.call (raise) and redis.pcall: it runs a command and
// returns its reply converted to Lua. An error reply is returned by
// redis.pcall as a table {err = "..."}, and raised by redis.call as its
// text, which is what a Lua pcall around redis.call gets in Redis 7.0.
func (e *engine) call(L *lua.LState, raise bool) int {
	n := L.GetTop()
	if n == 0 {
		return e.fail(L, raise, "ERR Please specify at least one argument for this redis lib call")
	}
	args := e.args[:0]
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args = append(args, string(v))
		case lua.LNumber:
			args = append(args, formatNumber(float64(v)))
		default:
			return e.fail(L, raise, "ERR Lua redis lib command arguments must be strings or integers")
		}
	}
	e.args = args // commands keep no reference to the slice, only to its strings
	reply := e.s.execFromScript(args)
	if err, ok := reply.(Error); ok {
		return e.fail(L, raise, string(err))
	}
	L.Push(toLua(L, reply))
	return 1
}

// fail raises (redis.call) or returns (redis.pcall) an error.
func (e *engine) fail(L *lua.LState, raise bool, msg string) int {
	msg = normalizeError(msg)
	if !raise {
		L.Push(errorTable(L, msg))
		return 1
	}
	e.raised, e.raisedLine = msg, lineOf(L.Where(1))
	L.Error(lua.LString(msg), 0) // level 0: the text as is, no position
	return 0
}

// luaError is Lua's error(value [, level]), which also notes the line it
// was called on for failure (guard.lua's NOREGISTRY is raised at level 0).
func (e *engine) luaError(L *lua.LState) int {
	obj := L.CheckAny(1)
	level := L.OptInt(2, 1)
	if str, ok := obj.(lua.LString); ok {
		e.errored, e.erroredLine = string(str), lineOf(L.Where(1))
		if level > 0 {
			e.errored = L.Where(level) + e.errored
		}
	}
	L.Error(obj, level)
	return 0
}

// failure turns the error a script failed with into the error reply
// Redis gives.
func (e *engine) failure(err error) Error {
	ae, ok := err.(*lua.ApiError)
	if !ok || ae.Type == lua.ApiErrorPanic {
		panic(err) // a bug in a command, not in the script: let it show
	}
	if t, ok := ae.Object.(*lua.LTable); ok { // error({err = ...})
		if m, ok := t.RawGetString("err").(lua.LString); ok {
			return Error(m)
		}
		return Error("ERR Error running script f_" + e.sha + ": an error table without err")
	}
	msg, line := ae.Object.String(), 0
	if e.raised != "" && msg == e.raised {
		line = e.raisedLine // an error reply of redis.call: its code stays
	} else {
		// A runtime error: its text starts with the position, unless
		// error() raised it at level 0: then the line of that call.
		raised := msg
		msg, line = "ERR "+msg, lineOf(msg)
		if line == 0 && e.errored != "" && raised == e.errored {
			line = e.erroredLine
		}
	}
	msg += " script: " + e.sha
	if line > 0 {
		msg += fmt.Sprintf(", on @%s:%d.", chunkName, line)
	}
	return Error(msg)
}

// lineOf reads the line of a position "user_script:12:" at the start of
// s, or returns 0.
func lineOf(s string) int {
	rest, ok := strings.CutPrefix(s, chunkName+":")
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, ":")
	n, _ := strconv.Atoi(digits)
	return n
}

// normalizeError gives an error text the "CODE message" form Redis gives
// the error tables of scripts (luaPushErrorBuff): a leading '-' is
// dropped, and a text without a code ("oops") gets "ERR ".
func normalizeError(msg string) string {
	if !strings.HasPrefix(msg, "-") {
		msg = "-" + msg
	}
	code, text, ok := strings.Cut(msg[1:], " ")
	if !ok {
		code, text = "ERR", msg[1:]
	}
	return code + " " + strings.TrimRight(text, "\r\n")
}

// lrand48 is the generator behind Redis's math.random (rand.c): POSIX
// lrand48's 48-bit linear congruence. Redis 7 never seeds it unless a
// script calls math.randomseed, so it starts from the initial state of
// rand.c's static variables.
type lrand48 struct{ x uint64 }

func newLrand48() lrand48 { return lrand48{x: 0x1234abcd330e} }

func (r *lrand48) seed(v int32) { r.x = uint64(uint32(v))<<16 | 0x330e }

func (r *lrand48) next() int32 {
	r.x = (0x5deece66d*r.x + 0xb) & (1<<48 - 1)
	return int32(r.x >> 17)
}

// mathRandom is Lua 5.1's math.random over lrand48, as Redis builds it.
func (e *engine) mathRandom(L *lua.LState) int {
	r := float64(e.s.luaRand.next()%math.MaxInt32) / math.MaxInt32
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (e *engine) mathRandomSeed(L *lua.LState) int {
	e.s.luaRand.seed(int32(L.CheckInt(1)))
	return 0
}
