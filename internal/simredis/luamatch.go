package simredis

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// gopher-lua compiles a pattern at every string.match and tries it at
// every position of the subject, allocating as it goes: guard.lua's
// string.match(INFO text, 'run_id:(%w+)'), twice per script call, took
// a third of the time of a renewal. fastMatch answers patterns of that
// one shape, a literal then (%w+), with a string search, and hands every
// other call to gopher-lua's string.match unchanged.

// wrapMatch replaces string.match in the string library table (which is
// also what methods on strings, s:match(...), find).
func wrapMatch(L *lua.LState) {
	lib := L.GetGlobal("string").(*lua.LTable)
	orig := lib.RawGetString("match").(*lua.LFunction).GFunction
	lib.RawSetString("match", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() == 2 {
			s, ok1 := L.Get(1).(lua.LString)
			p, ok2 := L.Get(2).(lua.LString)
			if lit, ok := literalThenWord(string(p)); ok1 && ok2 && ok {
				if w, found := fastMatch(string(s), lit); found {
					L.Push(lua.LString(w))
				} else {
					L.Push(lua.LNil)
				}
				return 1
			}
		}
		return orig(L)
	}))
}

// literalThenWord returns lit when pattern is lit .. "(%w+)" with lit
// free of pattern magic.
func literalThenWord(pattern string) (string, bool) {
	lit, ok := strings.CutSuffix(pattern, "(%w+)")
	if !ok || lit == "" || strings.ContainsAny(lit, "^$*+?.()[]%-") {
		return "", false
	}
	return lit, true
}

// fastMatch is string.match(s, lit .. "(%w+)"): the run of letters and
// digits after the first occurrence of lit that has one.
func fastMatch(s, lit string) (string, bool) {
	for from := 0; ; {
		i := strings.Index(s[from:], lit)
		if i < 0 {
			return "", false
		}
		start := from + i + len(lit)
		end := start
		for end < len(s) && isAlnum(s[end]) {
			end++
		}
		if end > start {
			return s[start:end], true
		}
		from += i + 1 // occurrences may overlap
	}
}

// isAlnum is Lua's %w in the C locale.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
