package server

import (
	"strconv"
	"strings"

	"github.com/tidwall/match"
)

// configParams are what CONFIG GET shows, in order: what tools ask for
// (redis-benchmark reads save and appendonly) and the limits in force.
// requirepass is never shown.
func (s *Server) configParams() [][2]string {
	return [][2]string{
		{"appendonly", "no"},
		{"databases", "1"},
		{"maxclients", strconv.Itoa(s.opts.MaxConns)},
		{"proto-max-bulk-len", strconv.Itoa(s.opts.MaxBulk)},
		{"save", ""},
		{"timeout", strconv.FormatInt(int64(s.opts.IdleTimeout.Seconds()), 10)},
	}
}

// CONFIG GET pattern [pattern ...] | HELP: settings as name/value pairs.
// Settings are flags of `flaked serve`, so CONFIG SET and friends are
// refused.
func cmdConfig(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "get":
		if len(args) < 3 {
			c.writeError(wrongArgs("config|get"))
			return
		}
		var out []string
		for _, p := range c.s.configParams() {
			for _, pat := range args[2:] {
				if match.Match(p[0], strings.ToLower(string(pat))) {
					out = append(out, p[0], p[1])
					break
				}
			}
		}
		c.writePairs(out...)
	case "set", "resetstat", "rewrite":
		c.writeErrorf("ERR CONFIG %s is not supported: flaked is configured by the flags of 'flaked serve'", strings.ToUpper(sub))
	case "help":
		c.writeStrings(
			"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GET <pattern> [<pattern> ...]", "    Return parameters matching the glob-like <pattern> and their values.",
			"HELP", "    Print this help.",
		)
	default:
		c.writeError(unknownSubcommand("config", args[1]))
	}
}
