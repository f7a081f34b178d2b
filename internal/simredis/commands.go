package simredis

import (
	"strings"
)

// command is one Redis command.
type command struct {
	name string // lower case, as Redis's error replies name it
	// arity is Redis's: the number of arguments including the name when
	// positive, at least -arity when negative.
	arity int
	// noScript commands are refused inside scripts, as Redis refuses them.
	noScript bool
	// write commands advance the replication offset (replicas.go).
	write bool
	run   func(s *Server, args []string) any
}

// commands holds each command under its upper- and lower-case name: go-redis
// sends lower case, scripts mostly upper, and neither then pays for
// strings.ToUpper.
var commands = map[string]*command{}

func init() {
	for _, table := range [][]*command{keyCommands, stringCommands, hashCommands, setCommands,
		streamCommands, serverCommands, scriptCommands, {waitCommand}} {
		for _, c := range table {
			commands[c.name] = c
			commands[strings.ToUpper(c.name)] = c
		}
	}
	for _, name := range writeCommands {
		commands[name].write = true
	}
}

func lookup(name string) *command {
	if c := commands[name]; c != nil {
		return c
	}
	return commands[strings.ToUpper(name)]
}

func (c *command) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}

// exec runs one command sent by a client.
func (s *Server) exec(args []string) any {
	if len(args) == 0 {
		return Error("ERR empty command")
	}
	record(args)
	c := lookup(args[0])
	if c == nil {
		return unknownCommand(args)
	}
	if !c.arityOK(len(args)) {
		return errArity(c.name)
	}
	if c.name == "info" && s.infoFault != InfoOK {
		if err := s.infoRefused(args, false); err != nil {
			return err
		}
	}
	if c.write {
		s.wrote()
	}
	return c.run(s, args)
}

// execFromScript runs one command of redis.call or redis.pcall, with the
// errors Redis gives scripts.
func (s *Server) execFromScript(args []string) any {
	s.stats.ScriptCommands++
	record(args)
	c := lookup(args[0])
	switch {
	case c == nil:
		return Error("ERR Unknown Redis command called from script")
	case !c.arityOK(len(args)):
		return Error("ERR Wrong number of args calling Redis command from script")
	case c.noScript:
		return Error("ERR This Redis command is not allowed from script")
	}
	if c.name == "info" && s.infoFault != InfoOK {
		if err := s.infoRefused(args, true); err != nil {
			return err
		}
	}
	if c.write {
		s.wrote()
	}
	return c.run(s, args)
}

// unknownCommand is Redis 7's reply to a command it does not know: the
// arguments are quoted until they pass 128 bytes.
func unknownCommand(args []string) Error {
	var quoted strings.Builder
	for _, a := range args[1:] {
		if quoted.Len() >= 128 {
			break
		}
		quoted.WriteString("'" + clip(a, 128-quoted.Len()) + "' ")
	}
	return Error("ERR unknown command '" + clip(args[0], 128) + "', with args beginning with: " + quoted.String())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// parseInt reads an integer argument the way Redis does (string2ll): an
// optional minus sign and digits without leading zeros, no spaces, no plus
// sign, no "-0", within int64.
func parseInt(s string) (int64, bool) {
	if s == "0" {
		return 0, true
	}
	digits := strings.TrimPrefix(s, "-")
	// 19 digits cannot overflow a uint64; the int64 bounds are checked below.
	if digits == "" || len(digits) > 19 || digits[0] < '1' || digits[0] > '9' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if len(digits) < len(s) { // negative
		if n > 1<<63 {
			return 0, false
		}
		return int64(-n), true // -(1<<63) included: two's complement
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}
