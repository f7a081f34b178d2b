package simredis

// Branch coverage of scripts. gopher-lua has no line hooks (no
// debug.sethook), so a script registered with Cover is compiled from an
// instrumented copy of its text: a counter statement after each `then`
// and `else`, after each function's parameter list, and before each
// `return`, on the same line, so line numbers (and the error texts that
// name them) stay the same. The script keeps its SHA1 (the code sends
// the original text), and the counters live in a table of the Lua state
// that no script can name without knowing it is there.

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"
)

// Branch is one counted place of a covered script.
type Branch struct {
	File string // the part the line is in, e.g. "guard.lua"
	Line int    // line within File, from 1
	Kind string // "then", "else", "function", "return"
	Text string // the source line, trimmed
}

// ID names the branch as the coverage table does: file:line kind.
func (b Branch) ID() string { return b.File + ":" + strconv.Itoa(b.Line) + " " + b.Kind }

// Part is one file of a script made of several (flaked's writing scripts
// are args.lua + events.lua + guard.lua + the script): its name and how
// many lines it has, in order.
type Part struct {
	File  string
	Lines int
}

// covName is the Lua global holding the counters, covLocal the local a
// covered script reads it into.
const covName, covLocal = "__simredis_cov", "__simredis_c"

var coverage = struct {
	sync.Mutex
	branches []Branch
	byKey    map[string]int   // File:Line:Kind:n -> index
	texts    map[string][]int // script text -> the branch indexes it counts, by place
	srcs     map[string]string
}{byKey: map[string]int{}, texts: map[string][]int{}, srcs: map[string]string{}}

// Cover makes every server of this process count the branches of script
// text src (made of parts, in order; one part for a plain file). Call it
// before the script is first loaded or evaluated: a script compiled
// before is run uninstrumented. Branches of the same file in several
// scripts (guard.lua) count together.
func Cover(src string, parts []Part) {
	coverage.Lock()
	defer coverage.Unlock()
	if _, ok := coverage.srcs[src]; ok {
		return
	}
	places := branchPlaces(src)
	lines := strings.Split(src, "\n")
	var idx []int
	for _, pl := range places {
		rest, line, name := pl.line, 0, "script"
		for _, p := range parts {
			if rest <= p.Lines {
				name, line = p.File, rest
				break
			}
			rest -= p.Lines
		}
		if line == 0 {
			line = rest
		}
		// Several places of a kind on one line get #2, #3...
		n := 1
		key := ""
		for {
			key = name + ":" + strconv.Itoa(line) + ":" + pl.kind + ":" + strconv.Itoa(n)
			if !placeTaken(idx, key) {
				break
			}
			n++
		}
		i, ok := coverage.byKey[key]
		if !ok {
			kind := pl.kind
			if n > 1 {
				kind += "#" + strconv.Itoa(n)
			}
			i = len(coverage.branches)
			coverage.branches = append(coverage.branches, Branch{File: name, Line: line, Kind: kind,
				Text: strings.TrimSpace(lines[pl.line-1])})
			coverage.byKey[key] = i
		}
		idx = append(idx, i)
	}
	coverage.texts[src] = idx
	coverage.srcs[src] = instrument(src, places, idx)
	covCount.Store(int64(len(coverage.branches)))
}

// covCount is len(coverage.branches), read at every script call.
var covCount atomic.Int64

// placeTaken reports whether key names a branch already among idx (the
// same file, line and kind met twice in one script).
func placeTaken(idx []int, key string) bool {
	i, ok := coverage.byKey[key]
	if !ok {
		return false
	}
	for _, j := range idx {
		if j == i {
			return true
		}
	}
	return false
}

// Branches returns every branch registered so far; a server's counts
// (Server.Coverage) are indexed the same way.
func Branches() []Branch {
	coverage.Lock()
	defer coverage.Unlock()
	return append([]Branch(nil), coverage.branches...)
}

// instrumented returns the text to compile for src: the instrumented
// copy when src is covered.
func instrumented(src string) string {
	coverage.Lock()
	defer coverage.Unlock()
	if s, ok := coverage.srcs[src]; ok {
		return s
	}
	return src
}

// Coverage adds to counts (grown as needed) how often each branch
// (Branches) ran on this server, and returns it.
func (s *Server) Coverage(counts []uint64) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lua == nil || s.lua.cov == nil {
		return counts
	}
	t := s.lua.cov
	n := t.Len()
	for len(counts) < n {
		counts = append(counts, 0)
	}
	for i := 1; i <= n; i++ {
		if v, ok := t.RawGetInt(i).(lua.LNumber); ok {
			counts[i-1] += uint64(v)
		}
	}
	return counts
}

// covTable makes sure the engine's counter table has a slot for every
// branch registered (a script covered after the state was made).
func (e *engine) covTable() {
	n := int(covCount.Load())
	if n == 0 || e.cov != nil && e.cov.Len() == n {
		return
	}
	if e.cov == nil {
		e.cov = e.L.CreateTable(n, 0)
		e.globals.RawSetString(covName, e.cov)
	}
	for i := e.cov.Len() + 1; i <= n; i++ {
		e.cov.RawSetInt(i, lua.LNumber(0))
	}
}

// place is one place to count in a script's text.
type place struct {
	off  int    // byte offset where the counter goes
	line int    // line of the keyword, from 1
	kind string // then, else, function, return
}

// branchPlaces scans Lua source for the places to count, skipping
// strings and comments.
func branchPlaces(src string) []place {
	var out []place
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			if lvl := longBracket(src[i+2:]); lvl >= 0 {
				i = skipLong(src, i+2, lvl, &line)
			} else {
				for i < len(src) && src[i] != '\n' {
					i++
				}
			}
		case c == '[' && longBracket(src[i:]) >= 0:
			i = skipLong(src, i, longBracket(src[i:]), &line)
		case c == '\'' || c == '"':
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				if i < len(src) && src[i] == '\n' {
					line++
				}
				i++
			}
			i++
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdent(src[j]) {
				j++
			}
			switch word := src[i:j]; word {
			case "then", "else":
				out = append(out, place{off: j, line: line, kind: word})
			case "return":
				out = append(out, place{off: i, line: line, kind: word})
			case "function":
				// After the parameter list.
				k := strings.IndexByte(src[j:], ')')
				if k >= 0 {
					out = append(out, place{off: j + k + 1, line: line, kind: word})
				}
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// longBracket returns the level of a long bracket [[ or [=[ ... at the
// start of s, or -1.
func longBracket(s string) int {
	if len(s) < 2 || s[0] != '[' {
		return -1
	}
	n := 1
	for n < len(s) && s[n] == '=' {
		n++
	}
	if n < len(s) && s[n] == '[' {
		return n - 1
	}
	return -1
}

// skipLong skips a long string or comment whose bracket starts at i.
func skipLong(src string, i, lvl int, line *int) int {
	end := "]" + strings.Repeat("=", lvl) + "]"
	j := strings.Index(src[i:], end)
	if j < 0 {
		return len(src)
	}
	*line += strings.Count(src[i:i+j], "\n")
	return i + j + len(end)
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdent(c byte) bool      { return isIdentStart(c) || c >= '0' && c <= '9' }

// instrument inserts a counter statement at each place (idx: the
// branch each counts).
func instrument(src string, places []place, idx []int) string {
	var b strings.Builder
	// One global read per call, on line 1: the counters are then a local
	// (an upvalue in functions), as cheap as Lua gets.
	b.WriteString("local " + covLocal + "=" + covName + " ")
	prev := 0
	for k, pl := range places {
		b.WriteString(src[prev:pl.off])
		n := strconv.Itoa(idx[k] + 1)
		b.WriteString(" " + covLocal + "[" + n + "]=" + covLocal + "[" + n + "]+1 ")
		prev = pl.off
	}
	b.WriteString(src[prev:])
	return b.String()
}
