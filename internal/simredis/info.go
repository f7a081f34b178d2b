package simredis

import (
	"strconv"
	"strings"
)

// Version is the Redis version the server reports and whose behaviour it
// follows.
const Version = "7.0.15"

var serverCommands = []*command{
	{name: "time", arity: 1, run: cmdTime},
	{name: "info", arity: -1, run: cmdInfo},
}

// cmdTime is TIME: seconds and microseconds of the server clock, as bulk
// strings.
func cmdTime(s *Server, _ []string) any {
	us := s.nowTime.UnixMicro()
	return []any{strconv.FormatInt(us/1_000_000, 10), strconv.FormatInt(us%1_000_000, 10)}
}

// infoCache holds the INFO sections that change only with the identity:
// guard.lua reads them at every script call.
type infoCache struct {
	server, replication string
}

// cmdInfo is INFO [section ...]: the sections server (run_id), replication
// (master_replid), stats and keyspace, in Redis's format ("# Server\r\n"
// then "name:value\r\n" lines, sections apart by an empty line). Unknown
// sections are left out, as Redis does.
func cmdInfo(s *Server, args []string) any {
	if len(args) == 2 { // guard.lua's two calls per script: no list to build
		for _, name := range []string{"server", "replication"} {
			if strings.EqualFold(args[1], name) {
				return s.infoSection(name)
			}
		}
	}
	var parts []string
	for _, name := range []string{"server", "memory", "stats", "replication", "keyspace"} {
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
		return s.replicationInfo()
	case "memory":
		return s.memoryInfo()
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
