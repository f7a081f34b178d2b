package simredis

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

var scriptCommands = []*command{
	{name: "eval", arity: -3, noScript: true, run: cmdEval},
	{name: "evalsha", arity: -3, noScript: true, run: cmdEvalSha},
}

// protos holds every script compiled in this process, by SHA1. Compiling
// flaked's scripts costs far more than running them, and a compiled
// FunctionProto is only read when run, so the Lua states of all servers
// (on any goroutine) share one; a server's own script cache
// (Server.scripts) only says which scripts it knows.
var protos = struct {
	sync.Mutex
	m map[string]*lua.FunctionProto
}{m: map[string]*lua.FunctionProto{}}

// chunkName is the name Redis 7 gives script code in error messages
// ("user_script:12: ...").
const chunkName = "user_script"

// compile returns the compiled script src, whose SHA1 is sha.
// The error is an Error reply.
func compile(sha, src string) (*lua.FunctionProto, error) {
	protos.Lock()
	p := protos.m[sha]
	protos.Unlock()
	if p != nil {
		return p, nil
	}
	chunk, err := parse.Parse(strings.NewReader(instrumented(src)), chunkName)
	if err == nil {
		p, err = lua.Compile(chunk, chunkName)
	}
	if err != nil {
		return nil, Error("ERR Error compiling script (new function): " + strings.TrimSpace(err.Error()))
	}
	// Redis runs the body as function f_<sha>() ... end, which takes no
	// arguments; gopher-lua compiles a chunk as a vararg function, and
	// with Lua 5.0's compatibility on builds it an "arg" table, with a map
	// of 32 slots, at every call (a quarter of a renewal's allocations)
	// that the chunk cannot even name.
	p.IsVarArg &^= lua.VarArgNeedsArg
	protos.Lock()
	protos.m[sha] = p
	protos.Unlock()
	return p, nil
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// cmdEval is EVAL script numkeys key... arg...; like Redis 7 it also adds
// the script to the cache, so EVALSHA finds it after.
func cmdEval(s *Server, args []string) any {
	if err := checkNumKeys(args[2:]); err != nil { // before caching, as Redis
		return err
	}
	sha := sha1hex(args[1])
	p, err := compile(sha, args[1])
	if err != nil {
		return err
	}
	s.scripts[sha] = p
	return s.runScript(sha, p, args[2:])
}

func cmdEvalSha(s *Server, args []string) any {
	sha := strings.ToLower(args[1])
	p := s.scripts[sha]
	if p == nil {
		return errNoScript
	}
	return s.runScript(sha, p, args[2:])
}

// checkNumKeys checks args = numkeys key... arg....
func checkNumKeys(args []string) any {
	n, ok := parseInt(args[0])
	switch {
	case !ok:
		return errNotInt
	case n < 0:
		return Error("ERR Number of keys can't be negative")
	case n > int64(len(args)-1):
		return Error("ERR Number of keys can't be greater than number of args")
	}
	return nil
}

// runScript runs a script with args = numkeys key... arg....
func (s *Server) runScript(sha string, p *lua.FunctionProto, args []string) any {
	if err := checkNumKeys(args); err != nil {
		return err
	}
	n, _ := parseInt(args[0])
	s.stats.ScriptCalls++
	if s.lua == nil {
		s.lua = newEngine(s)
	}
	return s.lua.run(sha, p, args[1:1+n], args[1+n:])
}
