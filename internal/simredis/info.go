package simredis

import (
	"strconv"
	"strings"
)

// Version is the Redis version the server reports and whose behaviour it
// follows.
const Version = "7.0.15"

var serverCommands = []*command{
	{name: "ping", arity: -1, run: cmdPing},
	{name: "echo", arity: 2, run: func(_ *Server, a []string) any { return a[1] }},
	{name: "time", arity: 1, run: cmdTime},
	{name: "info", arity: -1, run: cmdInfo},
	{name: "select", arity: 2, run: cmdSelect},
	{name: "save", arity: 1, noScript: true, run: func(*Server, []string) any { return statusOK }},
	{name: "bgsave", arity: -1, noScript: true, run: func(*Server, []string) any { return status("Background saving started") }},
	// A transaction needs a connection's state, which Do has not: the
	// client runs TxPipelined itself (client.go).
	{name: "multi", arity: 1, noScript: true, run: noTransactions},
	{name: "exec", arity: 1, noScript: true, run: noTransactions},
	{name: "discard", arity: 1, noScript: true, run: noTransactions},
	{name: "watch", arity: -2, noScript: true, run: noTransactions},
	{name: "unwatch", arity: 1, noScript: true, run: noTransactions},
}

func noTransactions(_ *Server, args []string) any {
	return Error("ERR simredis: " + strings.ToUpper(args[0]) + " is not supported by Do; the client's TxPipelined runs a transaction")
}

func cmdPing(_ *Server, args []string) any {
	switch len(args) {
	case 1:
		return status("PONG")
	case 2:
		return args[1]
	}
	return errArity("ping")
}

// cmdTime is TIME: seconds and microseconds of the server clock, as bulk
// strings.
func cmdTime(s *Server, _ []string) any {
	us := s.nowTime.UnixMicro()
	return []any{strconv.FormatInt(us/1_000_000, 10), strconv.FormatInt(us%1_000_000, 10)}
}

// cmdSelect accepts database 0 only: the simulation has one keyspace.
func cmdSelect(_ *Server, args []string) any {
	if args[1] != "0" {
		return Error("ERR simredis: only database 0 exists")
	}
	return statusOK
}

// infoCache holds the INFO sections that change only with the identity:
// guard.lua reads three of them, in one call, at every script call.
type infoCache struct {
	server, replication, guard string
}

// cmdInfo is INFO [section ...]: the sections server (run_id), replication
// (master_replid), memory (maxmemory_policy), stats and keyspace, in
// Redis's format ("# Server\r\n" then "name:value\r\n" lines, sections
// apart by an empty line). Unknown sections are left out, as Redis does.
func cmdInfo(s *Server, args []string) any {
	if len(args) == 4 && args[1] == "server" && args[2] == "replication" && args[3] == "memory" {
		// guard.lua's call at every script call: no list to build.
		if s.info.guard == "" {
			s.info.guard = s.infoSection("server") + "\r\n" + s.infoSection("replication") + "\r\n" + s.infoSection("memory")
		}
		return s.info.guard
	}
	if len(args) == 2 {
		for _, name := range []string{"server", "replication"} {
			if strings.EqualFold(args[1], name) {
				return s.infoSection(name)
			}
		}
	}
	var parts []string
	for _, name := range []string{"server", "stats", "replication", "memory", "keyspace"} {
		if len(args) == 1 || wantSection(args[1:], name) {
			parts = append(parts, s.infoSection(name))
		}
	}
	return strings.Join(parts, "\r\n")
}

func wantSection(asked []string, name string) bool {
	for _, a := range asked {
		if strings.EqualFold(a, name) || strings.EqualFold(a, "all") ||
			strings.EqualFold(a, "everything") || strings.EqualFold(a, "default") {
			return true
		}
	}
	return false
}

func (s *Server) infoSection(name string) string {
	switch name {
	case "server":
		if s.info.server == "" {
			// run_id comes first (Redis has it further down): gopher-lua's
			// string.match, which guard.lua runs on this at every script
			// call, costs about a microsecond per character it skips.
			s.info.server = "# Server\r\n" +
				"run_id:" + s.runID + "\r\n" +
				"redis_version:" + Version + "\r\n" +
				"redis_mode:standalone\r\n" +
				"simredis:1\r\n"
		}
		return s.info.server
	case "replication":
		if s.info.replication == "" {
			s.info.replication = "# Replication\r\n" +
				"master_replid:" + s.replID + "\r\n" + // first: see server
				"role:master\r\n" +
				"connected_slaves:0\r\n" +
				"master_failover_state:no-failover\r\n" +
				"master_replid2:0000000000000000000000000000000000000000\r\n" +
				"master_repl_offset:0\r\n" +
				"second_repl_offset:-1\r\n"
		}
		return s.info.replication
	case "memory":
		// Never evicts: guard.lua refuses allkeys-* policies.
		return "# Memory\r\n" + "maxmemory_policy:noeviction\r\n" + "maxmemory:0\r\n"
	case "stats":
		return "# Stats\r\n" +
			"total_commands_processed:" + strconv.FormatUint(s.stats.Commands, 10) + "\r\n"
	case "keyspace":
		if len(s.db.keys) == 0 {
			return "# Keyspace\r\n"
		}
		return "# Keyspace\r\n" + "db0:keys=" + strconv.Itoa(len(s.db.keys)) +
			",expires=" + strconv.Itoa(len(s.db.expires)) + ",avg_ttl=0\r\n"
	}
	return ""
}
