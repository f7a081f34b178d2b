package server

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// clientSubcommands are CLIENT's subcommands: arity as for commands.
var clientSubcommands = map[string]struct {
	arity int
	run   func(c *conn, args [][]byte)
}{
	"id":       {2, func(c *conn, _ [][]byte) { c.writeUint(c.id) }},
	"setname":  {3, clientSetName},
	"getname":  {2, clientGetName},
	"setinfo":  {4, clientSetInfo},
	"info":     {2, func(c *conn, _ [][]byte) { c.writeBulkString(c.line()) }},
	"list":     {-2, clientList},
	"no-evict": {3, clientOnOff},
	"no-touch": {3, clientOnOff},
	"help":     {2, clientHelp},
}

// CLIENT ID | SETNAME | GETNAME | SETINFO | INFO | LIST | NO-EVICT |
// NO-TOUCH | HELP: what Redis clients send on connect, and what an operator
// uses to see who is connected.
func cmdClient(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	sc, ok := clientSubcommands[sub]
	if !ok {
		c.writeError(unknownSubcommand("client", args[1]))
		return
	}
	if sc.arity > 0 && len(args) != sc.arity || sc.arity < 0 && len(args) < -sc.arity {
		c.writeError(wrongArgs("client|" + sub))
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

// CLIENT LIST [TYPE normal|master|replica|pubsub]: every client is normal.
func clientList(c *conn, args [][]byte) {
	all := true
	switch {
	case len(args) == 2:
	case len(args) == 4 && equalFold(args[2], "type"):
		typ := strings.ToLower(string(args[3]))
		switch typ {
		case "normal":
		case "master", "replica", "slave", "pubsub":
			all = false
		default:
			c.writeErrorf("ERR Unknown client type '%.128s'", args[3])
			return
		}
	default:
		c.writeError("ERR syntax error")
		return
	}
	var b strings.Builder
	if all {
		for _, other := range c.s.clients() {
			b.WriteString(other.line())
		}
	}
	c.writeBulkString(b.String())
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
		"LIST [TYPE <normal|master|replica|pubsub>]", "    Return information about client connections.",
		"GETNAME", "    Return the name of the current connection.",
		"SETNAME <name>", "    Assign the name <name> to the current connection.",
		"SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client meta attributes.",
		"NO-EVICT (ON|OFF)", "    Accepted; flaked evicts nothing.",
		"NO-TOUCH (ON|OFF)", "    Accepted; flaked has no keys.",
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

// line is the client's CLIENT LIST line, in Redis's format (the fields
// that mean something here). Safe to call from other connections.
func (c *conn) line() string {
	c.mu.Lock()
	name, libName, libVer := c.name, c.libName, c.libVer
	c.mu.Unlock()
	cmd := "NULL"
	if last := c.last.Load(); last != nil {
		cmd = last.name
	}
	now := time.Now()
	idle := now.Sub(time.Unix(0, c.active.Load()))
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s age=%d idle=%d flags=N db=0 cmd=%s user=default resp=2 lib-name=%s lib-ver=%s\n",
		c.id, c.addr, c.laddr, name, int64(now.Sub(c.born)/time.Second), int64(idle/time.Second), cmd, libName, libVer)
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
