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

// The same holds for replicas.lua's string.gmatch over INFO replication
// and for a pattern whose literal start the subject does not contain: a
// match can only begin where that literal is, so when it is nowhere the
// answer is nil (match) or no iteration (gmatch) without gopher-lua.

// wrapMatch replaces string.match and string.gmatch in the string library
// table (which is also what methods on strings, s:match(...), find).
func wrapMatch(L *lua.LState) {
	lib := L.GetGlobal("string").(*lua.LTable)
	orig := lib.RawGetString("match").(*lua.LFunction).GFunction
	lib.RawSetString("match", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() == 2 {
			s, ok1 := L.Get(1).(lua.LString)
			p, ok2 := L.Get(2).(lua.LString)
			if ok1 && ok2 {
				if lit, class, ok := literalThenRun(string(p)); ok {
					if w, found := fastMatch(string(s), lit, class); found {
						L.Push(lua.LString(w))
					} else {
						L.Push(lua.LNil)
					}
					return 1
				}
				if cannotMatch(string(s), string(p)) {
					L.Push(lua.LNil)
					return 1
				}
			}
		}
		return orig(L)
	}))
	gmatch := lib.RawGetString("gmatch").(*lua.LFunction)
	origG := gmatch.GFunction
	// gopher-lua's gmatch returns its upvalue, the iterator: the
	// replacement carries the same upvalues.
	var upvalues []lua.LValue
	for _, u := range gmatch.Upvalues {
		upvalues = append(upvalues, u.Value())
	}
	none := L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNil); return 1 })
	lib.RawSetString("gmatch", L.NewClosure(func(L *lua.LState) int {
		if L.GetTop() == 2 {
			s, ok1 := L.Get(1).(lua.LString)
			p, ok2 := L.Get(2).(lua.LString)
			if ok1 && ok2 && cannotMatch(string(s), string(p)) {
				L.Push(none)
				return 1
			}
		}
		return origG(L)
	}, upvalues...))
}

// literalThenRun returns lit and the class when pattern is lit .. "(%w+)"
// or lit .. "(%d+)" with lit free of pattern magic.
func literalThenRun(pattern string) (lit string, class byte, ok bool) {
	for _, c := range []byte{'w', 'd'} {
		if l, found := strings.CutSuffix(pattern, "(%"+string(c)+"+)"); found && l != "" && !strings.ContainsAny(l, magic) {
			return l, c, true
		}
	}
	return "", 0, false
}

// magic are the characters of Lua patterns that are not themselves.
const magic = "^$*+?.()[]%-"

// requiredLiterals are the runs of plain characters of pattern that every
// match contains: Lua patterns have no alternation and quantify single
// characters only, so each such run (less a character a quantifier
// follows) is in every match. Nil for the forms it does not read (%b, %f,
// an unclosed set): the caller then asks gopher-lua.
func requiredLiterals(pattern string) []string {
	var out []string
	var run []byte
	flush := func() {
		if len(run) > 0 {
			out = append(out, string(run))
			run = run[:0]
		}
	}
	quantified := func(i int) bool { return i < len(pattern) && strings.IndexByte("*+-?", pattern[i]) >= 0 }
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == '%':
			if i+1 >= len(pattern) {
				return nil
			}
			e := pattern[i+1]
			if e == 'b' || e == 'f' {
				return nil
			}
			i += 2
			if isAlnum(e) || quantified(i) { // a class, or an escaped character made optional
				flush()
				if quantified(i) {
					i++
				}
				continue
			}
			run = append(run, e)
		case c == '[':
			j := i + 1
			if j < len(pattern) && pattern[j] == '^' {
				j++
			}
			if j < len(pattern) && pattern[j] == ']' {
				j++
			}
			for j < len(pattern) && pattern[j] != ']' {
				if pattern[j] == '%' {
					j++
				}
				j++
			}
			if j >= len(pattern) {
				return nil
			}
			flush()
			i = j + 1
		case strings.IndexByte("^$().", c) >= 0:
			flush()
			i++
		case strings.IndexByte("*+-?", c) >= 0: // a quantifier with nothing before it is literal in Lua; be safe
			return nil
		default:
			i++
			if quantified(i) {
				flush()
				i++
				continue
			}
			run = append(run, c)
		}
		if quantified(i) { // the quantifier of a set or class was skipped with it above; one after a run ends it
			flush()
			i++
		}
	}
	flush()
	return out
}

// cannotMatch reports whether some literal every match of pattern
// contains is missing from s.
func cannotMatch(s, pattern string) bool {
	for _, lit := range requiredLiterals(pattern) {
		if !strings.Contains(s, lit) {
			return true
		}
	}
	return false
}

// fastMatch is string.match(s, lit .. "(%w+)") (class 'w') or
// lit .. "(%d+)" (class 'd'): the run of letters and digits (digits)
// after the first occurrence of lit that has one.
func fastMatch(s, lit string, class byte) (string, bool) {
	in := isAlnum
	if class == 'd' {
		in = isDigit
	}
	for from := 0; ; {
		i := strings.Index(s[from:], lit)
		if i < 0 {
			return "", false
		}
		start := from + i + len(lit)
		end := start
		for end < len(s) && in(s[end]) {
			end++
		}
		if end > start {
			return s[start:end], true
		}
		from += i + 1 // occurrences may overlap
	}
}

// isDigit is Lua's %d.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isAlnum is Lua's %w in the C locale.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
