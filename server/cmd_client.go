package server

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// clientSubcommand is one of CLIENT's subcommands: arity as for commands;
// name is how CLIENT LIST names it (cmd=client|info), as Redis 7 does.
type clientSubcommand struct {
	name  string
	arity int
	run   func(c *conn, args [][]byte)
}

var clientSubcommands = map[string]*clientSubcommand{}

func init() {
	for _, sc := range []clientSubcommand{
		{"id", 2, func(c *conn, _ [][]byte) { c.writeUint(c.id) }},
		{"setname", 3, clientSetName},
		{"getname", 2, clientGetName},
		{"setinfo", 4, clientSetInfo},
		{"info", 2, func(c *conn, _ [][]byte) { c.writeVerbatim(c.line()) }},
		{"list", -2, clientList},
		{"no-evict", 3, clientOnOff},
		{"no-touch", 3, clientOnOff},
		{"tracking", -3, clientTracking},
		{"caching", 3, clientCaching},
		{"getredir", 2, clientGetRedir},
		{"trackinginfo", 2, clientTrackingInfo},
		{"help", 2, clientHelp},
	} {
		sub := sc.name
		sc.name = "client|" + sub
		clientSubcommands[sub] = &sc
	}
}

// CLIENT ID | SETNAME | GETNAME | SETINFO | INFO | LIST | NO-EVICT |
// NO-TOUCH | TRACKING | CACHING | GETREDIR | TRACKINGINFO | HELP: what
// Redis clients send on connect, and what an operator uses to see who is
// connected.
func cmdClient(c *conn, args [][]byte) {
	sc, ok := clientSubcommands[strings.ToLower(string(args[1]))]
	if !ok {
		c.writeError(unknownSubcommand("client", args[1]))
		return
	}
	c.lastSub.Store(&sc.name)
	if sc.arity > 0 && len(args) != sc.arity || sc.arity < 0 && len(args) < -sc.arity {
		c.writeError(wrongArgs(sc.name))
		return
	}
	sc.run(c, args)
}

func clientSetName(c *conn, args [][]byte) {
	if c.setName(args[2]) {
		c.writeOK()
	}
}

// setName sets the client's name, or answers why it cannot.
func (c *conn) setName(name []byte) bool {
	if !printable(name) {
		c.writeError("ERR Client names cannot contain spaces, newlines or special characters.")
		return false
	}
	c.mu.Lock()
	c.name = string(name)
	c.mu.Unlock()
	return true
}

func clientGetName(c *conn, _ [][]byte) {
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	if name == "" {
		c.writeNull()
		return
	}
	c.writeBulkString(name)
}

func clientSetInfo(c *conn, args [][]byte) {
	val := args[3]
	if !printable(val) {
		c.writeErrorf("ERR %s cannot contain spaces, newlines or special characters.", strings.ToLower(string(args[2])))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case equalFold(args[2], "lib-name"):
		c.libName = string(val)
	case equalFold(args[2], "lib-ver"):
		c.libVer = string(val)
	default:
		c.writeErrorf("ERR Unrecognized option '%.128s'", args[2])
		return
	}
	c.writeOK()
}

// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...]: every
// client is normal.
func clientList(c *conn, args [][]byte) {
	keep := func(*conn) bool { return true }
	switch {
	case len(args) == 2:
	case len(args) == 4 && equalFold(args[2], "type"):
		switch strings.ToLower(string(args[3])) {
		case "normal":
		case "master", "replica", "slave", "pubsub":
			keep = func(*conn) bool { return false }
		default:
			c.writeErrorf("ERR Unknown client type '%.128s'", args[3])
			return
		}
	case len(args) > 3 && equalFold(args[2], "id"):
		ids := map[uint64]bool{}
		for _, a := range args[3:] {
			id, ok := parseInt(a)
			if !ok {
				c.writeError("ERR Invalid client ID")
				return
			}
			ids[uint64(id)] = true
		}
		keep = func(other *conn) bool { return ids[other.id] }
	default:
		c.writeError("ERR syntax error")
		return
	}
	var b strings.Builder
	for _, other := range c.s.clients() {
		if keep(other) {
			b.WriteString(other.line())
		}
	}
	c.writeVerbatim(b.String())
}

// NO-EVICT and NO-TOUCH on|off: nothing to evict or touch here.
func clientOnOff(c *conn, args [][]byte) {
	if !equalFold(args[2], "on") && !equalFold(args[2], "off") {
		c.writeError("ERR syntax error")
		return
	}
	c.writeOK()
}

func clientHelp(c *conn, _ [][]byte) {
	c.writeStrings(
		"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"ID", "    Return the ID of the current connection.",
		"INFO", "    Return information about the current client connection.",
		"LIST [TYPE <normal|master|replica|pubsub>] [ID <id> [<id> ...]]", "    Return information about client connections.",
		"GETNAME", "    Return the name of the current connection.",
		"SETNAME <name>", "    Assign the name <name> to the current connection.",
		"SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client meta attributes.",
		"NO-EVICT (ON|OFF)", "    Accepted; flaked evicts nothing.",
		"NO-TOUCH (ON|OFF)", "    Accepted; flaked has no keys.",
		"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
		"    Accepted with Redis's checks; flaked has no keys, so it never sends an invalidation.",
		"CACHING (YES|NO)", "    Accepted in OPTIN/OPTOUT tracking mode.",
		"GETREDIR", "    Return the tracking redirect client ID, 0 for none, -1 when tracking is off.",
		"TRACKINGINFO", "    Return the tracking state of the current connection.",
		"HELP", "    Print this help.",
	)
}

// clients returns the open connections by ID.
func (s *Server) clients() []*conn {
	s.mu.Lock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// line is the client's CLIENT LIST line, with Redis 7.2's fields in its
// order (redis-py, for one, fails without them). Buffer sizes, which
// only this connection's goroutine may read, are shown as 0. Safe to call
// from other connections.
func (c *conn) line() string {
	c.mu.Lock()
	name, libName, libVer, proto, multi, multiMem, trk := c.name, c.libName, c.libVer, c.proto, c.queued, c.queuedMem, c.trk
	c.mu.Unlock()
	cmd := "NULL"
	if last := c.last.Load(); last != nil {
		cmd = last.name
		if sub := c.lastSub.Load(); sub != nil && last.name == "client" {
			cmd = *sub
		}
	}
	flags, redir := "", int64(-1)
	if multi >= 0 {
		flags += "x"
	}
	if trk.on {
		flags, redir = flags+"t", trk.redir
	}
	if flags == "" {
		flags = "N"
	}
	now := time.Now()
	idle := now.Sub(time.Unix(0, c.active.Load()))
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=0 psub=0 ssub=0 multi=%d "+
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=%d rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=default "+
		"redir=%d resp=%d lib-name=%s lib-ver=%s\n",
		c.id, c.addr, c.laddr, c.sock, name, int64(now.Sub(c.born)/time.Second), int64(idle/time.Second), flags, multi,
		multiMem, cmd, redir, proto, libName, libVer)
}

// printable is Redis's rule for client names and library info: no spaces,
// newlines or other characters outside '!'..'~'.
func printable(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}
