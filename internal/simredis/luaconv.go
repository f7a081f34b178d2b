package simredis

import (
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// Conversions between replies and Lua values, as Redis 7 makes them for
// RESP2 (the protocol scripts get unless they call redis.setresp(3)).

// toLua converts a command's reply for a script: integer -> number, bulk
// -> string, nil -> false, array -> table (nil elements false), status ->
// {ok = ...}, error -> {err = ...}.
func toLua(L *lua.LState, r any) lua.LValue {
	switch v := r.(type) {
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case status:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(v))
		return t
	case Error:
		return errorTable(L, normalizeError(string(v)))
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, x := range v {
			t.RawSetInt(i+1, toLua(L, x))
		}
		return t
	}
	return lua.LFalse
}

// fromLua converts a script's return value to a reply: number -> integer
// (truncated toward zero), string -> bulk, true -> 1, false and nil ->
// nil, a table with a string err field -> error, with a string ok field
// -> status, any other table -> array of its elements 1, 2, ... up to the
// first nil.
func fromLua(v lua.LValue) any {
	switch v := v.(type) {
	case lua.LNumber:
		return int64(v)
	case lua.LString:
		return string(v)
	case lua.LBool:
		if v {
			return int64(1)
		}
		return nil
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return Error(e)
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return status(s)
		}
		out := []any{}
		for i := 1; ; i++ {
			x := v.RawGetInt(i)
			if x == lua.LNil {
				return out
			}
			out = append(out, fromLua(x))
		}
	}
	return nil
}

// errorTable returns {err = msg}.
func errorTable(L *lua.LState, msg string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	return t
}

// stringTable returns the array {ss[1], ss[2], ...}.
func stringTable(L *lua.LState, ss []string) *lua.LTable {
	t := L.CreateTable(len(ss), 0)
	for i, s := range ss {
		t.RawSetInt(i+1, lua.LString(s))
	}
	return t
}

// formatNumber formats a number passed to redis.call as Redis 7.0 does:
// "%.17g", so integers up to 1e17 come out in full ("1700000000000000")
// and fractions with 17 significant digits ("0.10000000000000001").
func formatNumber(f float64) string {
	// The common case, without the float formatter (-0 is "-0" in %g).
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}
