package server

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// command is one entry of the command table.
type command struct {
	name  string // lower case, as Redis reports command names
	arity int    // Redis's convention: n is exactly n words with the name, -n at least n
	// flags and acl (ACL categories) are what COMMAND INFO reports, Redis
	// 7's names.
	flags, acl []string
	// noAuth commands run before AUTH when RequirePass is set.
	noAuth bool
	// mayBlock commands can wait on a lock or Redis: an event loop hands
	// the connection to a goroutine before running one. mayWait commands
	// call conn.wait when they must wait (the generator's); EXEC leaves a
	// loop first when it holds either kind (cmd_multi.go).
	mayBlock, mayWait bool
	// txControl commands run at once inside MULTI instead of being queued,
	// as in Redis: EXEC, DISCARD, MULTI, WATCH, QUIT, RESET.
	txControl bool
	run       func(c *conn, args [][]byte)
	calls     atomic.Uint64
}

// Redis 7's command flags, as COMMAND INFO reports them.
var (
	fConn    = []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}
	fTx      = []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	fAnytime = []string{"loading", "stale", "fast"}

	cConn = []string{"@fast", "@connection"}
	cTx   = []string{"@fast", "@transaction"}
	cFast = []string{"@fast"}
	cSlow = []string{"@slow"}
)

// commandTable maps command names to the functions that run them. It is
// built per Server: the call counters live in it.
func commandTable() map[string]*command {
	cmds := []*command{
		{name: "ping", arity: -1, flags: []string{"fast"}, acl: cConn, run: cmdPing},
		{name: "echo", arity: 2, flags: fAnytime, acl: cConn, run: cmdEcho},
		{name: "nextid", arity: -1, flags: []string{"fast"}, mayWait: true, acl: cFast, run: cmdNextID},
		{name: "nextids", arity: -2, mayWait: true, acl: cSlow, run: cmdNextIDs},
		{name: "nextblock", arity: -2, flags: []string{"fast"}, mayWait: true, acl: cFast, run: cmdNextBlock},
		{name: "nextseq", arity: -2, flags: []string{"fast"}, mayWait: true, acl: cFast, run: cmdNextSeq},
		{name: "parse", arity: 2, flags: []string{"fast"}, acl: cFast, run: cmdParse},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, mayBlock: true, acl: []string{"@slow", "@dangerous"}, run: cmdInfo},
		{name: "auth", arity: -2, flags: fConn, noAuth: true, acl: cConn, run: cmdAuth},
		{name: "hello", arity: -1, flags: fConn, noAuth: true, acl: cConn, run: cmdHello},
		{name: "reset", arity: 1, flags: fConn, noAuth: true, txControl: true, acl: cConn, run: cmdReset},
		{name: "quit", arity: -1, flags: fConn, noAuth: true, txControl: true, acl: cConn, run: cmdQuit},
		{name: "client", arity: -2, flags: []string{"loading", "stale"}, acl: cSlow, run: cmdClient},
		{name: "select", arity: 2, flags: fAnytime, acl: cConn, run: cmdSelect},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"}, run: cmdCommand},
		{name: "config", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, acl: cSlow, run: cmdConfig},
		{name: "multi", arity: 1, flags: fTx, txControl: true, acl: cTx, run: cmdMulti},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, txControl: true, acl: []string{"@slow", "@transaction"}, run: cmdExec},
		{name: "discard", arity: 1, flags: fTx, txControl: true, acl: cTx, run: cmdDiscard},
		{name: "watch", arity: -2, flags: fTx, txControl: true, acl: cTx, run: cmdWatch},
		{name: "unwatch", arity: 1, flags: fTx, acl: cTx, run: cmdUnwatch},
		{name: "role", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"@admin", "@fast", "@dangerous"}, run: cmdRole},
		{name: "time", arity: 1, flags: fAnytime, acl: cFast, run: cmdTime},
		{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, acl: []string{"@keyspace", "@read", "@fast"}, run: cmdDBSize},
	}
	m := make(map[string]*command, len(cmds))
	for _, cmd := range cmds {
		m[cmd.name] = cmd
	}
	return m
}

// sortedCommands lists the table by name.
func (s *Server) sortedCommands() []*command {
	out := make([]*command, 0, len(s.cmds))
	for _, cmd := range s.cmds {
		out = append(out, cmd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// lookup finds a command by name, in any case, without allocating.
func (s *Server) lookup(name []byte) *command {
	// The hot commands first: comparing six bytes is cheaper than hashing.
	if len(name) == 6 && equalFold(name, "nextid") {
		return s.nextID
	}
	if cmd := s.cmds[string(name)]; cmd != nil {
		return cmd
	}
	var buf [16]byte // longer than every name
	if len(name) > len(buf) {
		return nil
	}
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return s.cmds[string(buf[:len(name)])]
}

// unknownCommand is Redis's error for a command it does not know.
func unknownCommand(args [][]byte) string {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		fmt.Fprintf(&b, "'%.*s' ", 128-b.Len(), a)
	}
	return fmt.Sprintf("ERR unknown command '%.128s', with args beginning with: %s", args[0], b.String())
}

// unknownSubcommand is Redis's error for a subcommand it does not know.
func unknownSubcommand(cmd string, sub []byte) string {
	return fmt.Sprintf("ERR unknown subcommand '%.128s'. Try %s HELP.", sub, strings.ToUpper(cmd))
}

// wrongArgs is Redis's arity error; name is "cmd" or "cmd|sub".
func wrongArgs(name string) string {
	return fmt.Sprintf("ERR wrong number of arguments for '%s' command", name)
}

// parseInt reads a decimal integer the way Redis does: an optional '-',
// then digits, no spaces, no '+', within int64.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// equalFold reports whether b is s in any case; s is lower case ASCII.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != s[i] {
			return false
		}
	}
	return true
}
