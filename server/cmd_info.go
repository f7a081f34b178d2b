package server

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// infoSections are INFO's sections in order; each appends key:value lines.
var infoSections = []struct {
	name  string
	lines func(s *Server, add func(k, v string))
}{
	{"Server", infoServer},
	{"Clients", infoClients},
	{"Stats", infoStats},
	{"Flaked", infoFlaked},
}

// INFO [section ...]: bulk text of "key:value" lines in "# Section" blocks,
// as Redis writes it. No section, "default", "all" or "everything" means
// all; an unknown section gives an empty reply.
func cmdInfo(c *conn, args [][]byte) {
	want := map[string]bool{}
	all := len(args) == 1
	for _, a := range args[1:] {
		name := strings.ToLower(string(a))
		if name == "default" || name == "all" || name == "everything" {
			all = true
		}
		want[name] = true
	}
	var b strings.Builder
	for _, sec := range infoSections {
		if !all && !want[strings.ToLower(sec.name)] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + sec.name + "\r\n")
		sec.lines(c.s, func(k, v string) {
			b.WriteString(infoClean(k))
			b.WriteByte(':')
			b.WriteString(infoClean(v))
			b.WriteString("\r\n")
		})
	}
	c.writeBulkString(b.String())
}

// infoClean keeps one pair on one line.
func infoClean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

func itoa[T int | int64 | uint64](n T) string {
	return strconv.FormatInt(int64(n), 10)
}

func infoServer(s *Server, add func(k, v string)) {
	up := time.Since(s.started)
	add("flaked_version", s.opts.Version)
	add("go_version", runtime.Version())
	add("os", runtime.GOOS+" "+runtime.GOARCH)
	add("process_id", itoa(os.Getpid()))
	add("tcp_port", itoa(s.port.Load()))
	add("tls", boolDigit(s.opts.TLSConfig != nil))
	add("uptime_in_seconds", itoa(int64(up/time.Second)))
	add("uptime_in_days", itoa(int64(up/(24*time.Hour))))
}

func infoClients(s *Server, add func(k, v string)) {
	add("connected_clients", itoa(s.stats.conns.Load()))
	add("maxclients", itoa(s.opts.MaxConns))
}

func infoStats(s *Server, add func(k, v string)) {
	st := &s.stats
	add("total_connections_received", itoa(st.connsTotal.Load()))
	add("rejected_connections", itoa(st.rejected.Load()))
	add("total_commands_processed", itoa(s.commandsProcessed()))
	add("ids_issued", itoa(st.idsFlake.Load()+st.idsCounter.Load()))
	add("ids_issued_flake", itoa(st.idsFlake.Load()))
	add("ids_issued_counter", itoa(st.idsCounter.Load()))
	add("nextid_errors", itoa(st.nextIDErrors.Load()))
	add("protocol_errors", itoa(st.protocolErrors.Load()))
	add("io_loops", itoa(uint64(s.numLoops())))
	add("loop_handoffs", itoa(st.handOffs.Load()))
	add("loop_returns", itoa(st.readopts.Load()))
}

func infoFlaked(s *Server, add func(k, v string)) {
	for _, kv := range s.gen.Info() {
		add(kv[0], kv[1])
	}
	add("mode", s.gen.Mode().String())
	add("layout", s.layout().String())
	add("ready", boolDigit(s.gen.Ready()))
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
