package server

import "strings"

// COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST | HELP]: the
// command table in Redis's shape, for clients and redis-cli. DOCS has no
// docs to give: an empty reply.
func cmdCommand(c *conn, args [][]byte) {
	s := c.s
	if len(args) == 1 {
		cmds := s.sortedCommands()
		c.writeArray(len(cmds))
		for _, cmd := range cmds {
			c.writeCommandInfo(cmd)
		}
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "count" && len(args) == 2:
		c.writeInt(int64(len(s.cmds)))
	case sub == "list" && len(args) == 2:
		cmds := s.sortedCommands()
		c.writeArray(len(cmds))
		for _, cmd := range cmds {
			c.writeBulkString(cmd.name)
		}
	case sub == "info" && len(args) == 2:
		c.writeArray(len(s.cmds))
		for _, cmd := range s.sortedCommands() {
			c.writeCommandInfo(cmd)
		}
	case sub == "info":
		c.writeArray(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := s.lookup(name); cmd != nil {
				c.writeCommandInfo(cmd)
			} else {
				c.writeNull()
			}
		}
	case sub == "docs": // a map of name to docs: none
		c.writeMap(0)
	case sub == "help" && len(args) == 2:
		c.writeStrings(
			"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"(no subcommand)", "    Return details about all commands.",
			"COUNT", "    Return the total number of commands.",
			"INFO [<command-name> ...]", "    Return details about the given commands, or all of them.",
			"DOCS [<command-name> ...]", "    Return an empty reply: flaked has no command docs.",
			"LIST", "    Return the names of all commands.",
			"HELP", "    Print this help.",
		)
	case sub == "count" || sub == "list" || sub == "help":
		c.writeError(wrongArgs("command|" + sub))
	default:
		c.writeError(unknownSubcommand("command", args[1]))
	}
}

// writeCommandInfo writes one entry of COMMAND INFO, Redis 7's shape:
// name, arity, flags, first key, last key, step, ACL categories, tips,
// key specs, subcommands; in RESP3 the lists are sets, as Redis 7.0
// sends them. flaked's commands take no keys.
func (c *conn) writeCommandInfo(cmd *command) {
	c.writeArray(10)
	c.writeBulkString(cmd.name)
	c.writeInt(int64(cmd.arity))
	c.writeSet(len(cmd.flags))
	for _, f := range cmd.flags {
		c.writeStatus(f)
	}
	c.writeInt(0)
	c.writeInt(0)
	c.writeInt(0)
	c.writeSet(len(cmd.acl))
	for _, a := range cmd.acl {
		c.writeStatus(a)
	}
	c.writeSet(0)
	c.writeSet(0)
	c.writeSet(0)
}
