package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// infoSections are INFO's sections in order; each appends key:value lines.
// Server to Keyspace carry the fields Redis tools read (redis-cli --stat:
// used_memory, connected_clients, blocked_clients,
// total_commands_processed, total_connections_received, dbN:keys), with
// the values that are true of flaked: a master with no replicas, no keys,
// no persistence of its own.
var infoSections = []struct {
	name  string
	lines func(s *Server, add func(k, v string))
}{
	{"Server", infoServer},
	{"Clients", infoClients},
	{"Memory", infoMemory},
	{"Persistence", infoPersistence},
	{"Stats", infoStats},
	{"Replication", infoReplication},
	{"Keyspace", func(*Server, func(k, v string)) {}}, // no keys: no db0 line, as Redis with an empty db
	{"Flaked", infoFlaked},
}

// INFO [section ...]: text of "key:value" lines in "# Section" blocks, as
// Redis writes it: a bulk string, in RESP3 a verbatim string. No section,
// "default", "all" or "everything" means all; an unknown section gives an
// empty reply.
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
	c.writeVerbatim(b.String())
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

// infoState is what INFO keeps between calls: the IDs Redis reports for
// the server and its replication stream (random per process, as Redis's),
// the operations rate and the memory peak.
type infoState struct {
	once          sync.Once
	runID, replID string

	mu      sync.Mutex
	at      time.Time // when ops was sampled
	ops     uint64
	opsRate int64 // per second, over the last sample interval
	peak    uint64
}

func (st *infoState) ids() (runID, replID string) {
	st.once.Do(func() { st.runID, st.replID = randomHex40(), randomHex40() })
	return st.runID, st.replID
}

func randomHex40() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// opsPerSec is instantaneous_ops_per_sec: the commands per second since
// the previous sample, sampled at most every 100 ms (Redis samples on a
// timer; flaked when asked, so the first INFO gives the average since
// start).
func (s *Server) opsPerSec() int64 {
	st := &s.info
	st.mu.Lock()
	defer st.mu.Unlock()
	now, n := time.Now(), s.commandsProcessed()
	if st.at.IsZero() {
		st.at = s.started
	}
	if dt := now.Sub(st.at); dt >= 100*time.Millisecond {
		st.opsRate = int64(float64(n-st.ops) / dt.Seconds())
		st.at, st.ops = now, n
	}
	return st.opsRate
}

func infoServer(s *Server, add func(k, v string)) {
	up := time.Since(s.started)
	runID, _ := s.info.ids()
	add("redis_version", RedisVersion)
	add("redis_mode", "standalone")
	add("flaked_version", s.opts.Version)
	add("go_version", runtime.Version())
	add("os", runtime.GOOS+" "+runtime.GOARCH)
	add("arch_bits", itoa(strconv.IntSize))
	add("process_id", itoa(os.Getpid()))
	add("run_id", runID)
	add("tcp_port", itoa(s.port.Load()))
	add("tls", boolDigit(s.opts.TLSConfig != nil))
	add("server_time_usec", itoa(time.Now().UnixMicro()))
	add("uptime_in_seconds", itoa(int64(up/time.Second)))
	add("uptime_in_days", itoa(int64(up/(24*time.Hour))))
}

func infoClients(s *Server, add func(k, v string)) {
	tracking := 0
	for _, c := range s.clients() {
		c.mu.Lock()
		if c.trk.on {
			tracking++
		}
		c.mu.Unlock()
	}
	add("connected_clients", itoa(s.stats.conns.Load()))
	add("cluster_connections", "0")
	add("maxclients", itoa(s.opts.MaxConns))
	add("client_recent_max_input_buffer", "0")
	add("client_recent_max_output_buffer", "0")
	add("blocked_clients", "0") // no blocking commands
	add("tracking_clients", itoa(tracking))
	add("clients_in_timeout_table", "0")
}

// infoMemory reports the Go runtime's memory: used_memory is what the
// heap's live and unswept objects, stacks and runtime structures take
// (the allocator's in-use bytes, as Redis's), used_memory_rss what is
// mapped and not returned to the OS.
func infoMemory(s *Server, add func(k, v string)) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(samples)
	val := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	rss := val(0) - val(1)
	used := rss - val(2)
	s.info.mu.Lock()
	s.info.peak = max(s.info.peak, used)
	peak := s.info.peak
	s.info.mu.Unlock()
	add("used_memory", itoa(used))
	add("used_memory_human", bytesToHuman(used))
	add("used_memory_rss", itoa(rss))
	add("used_memory_rss_human", bytesToHuman(rss))
	add("used_memory_peak", itoa(peak))
	add("used_memory_peak_human", bytesToHuman(peak))
	add("maxmemory", "0")
	add("maxmemory_human", "0B")
	add("maxmemory_policy", "noeviction")
	if used > 0 {
		add("mem_fragmentation_ratio", strconv.FormatFloat(float64(rss)/float64(used), 'f', 2, 64))
	}
}

// bytesToHuman is Redis's: 1023B, 1.00K, 1.50M, ...
func bytesToHuman(n uint64) string {
	if n < 1024 {
		return itoa(n) + "B"
	}
	d := float64(n) / 1024
	for _, unit := range []string{"K", "M", "G", "T", "P"} {
		if d < 1024 || unit == "P" {
			return fmt.Sprintf("%.2f%s", d, unit)
		}
		d /= 1024
	}
	panic("unreachable")
}

// infoPersistence: flaked keeps its state in Redis and its state file,
// never in an RDB or AOF of its own.
func infoPersistence(s *Server, add func(k, v string)) {
	add("loading", "0")
	add("async_loading", "0")
	add("rdb_changes_since_last_save", "0")
	add("rdb_bgsave_in_progress", "0")
	add("rdb_last_save_time", itoa(s.started.Unix()))
	add("rdb_last_bgsave_status", "ok")
	add("aof_enabled", "0")
	add("aof_rewrite_in_progress", "0")
	add("aof_last_bgrewrite_status", "ok")
}

func infoStats(s *Server, add func(k, v string)) {
	st := &s.stats
	add("total_connections_received", itoa(st.connsTotal.Load()))
	add("total_commands_processed", itoa(s.commandsProcessed()))
	add("instantaneous_ops_per_sec", itoa(s.opsPerSec()))
	add("rejected_connections", itoa(st.rejected.Load()))
	add("expired_keys", "0")
	add("evicted_keys", "0")
	add("keyspace_hits", "0")
	add("keyspace_misses", "0")
	add("pubsub_channels", "0")
	add("pubsub_patterns", "0")
	add("ids_issued", itoa(st.idsFlake.Load()+st.idsCounter.Load()))
	add("ids_issued_flake", itoa(st.idsFlake.Load()))
	add("ids_issued_counter", itoa(st.idsCounter.Load()))
	add("nextid_errors", itoa(st.nextIDErrors.Load()))
	add("protocol_errors", itoa(st.protocolErrors.Load()))
	add("io_loops", itoa(uint64(s.numLoops())))
	add("loop_handoffs", itoa(st.handOffs.Load()))
	add("loop_returns", itoa(st.readopts.Load()))
}

// infoReplication: a master without replicas, as ROLE says.
func infoReplication(s *Server, add func(k, v string)) {
	_, replID := s.info.ids()
	add("role", "master")
	add("connected_slaves", "0")
	add("master_failover_state", "no-failover")
	add("master_replid", replID)
	add("master_replid2", strings.Repeat("0", 40))
	add("master_repl_offset", "0")
	add("second_repl_offset", "-1")
	add("repl_backlog_active", "0")
	add("repl_backlog_size", "0")
	add("repl_backlog_first_byte_offset", "0")
	add("repl_backlog_histlen", "0")
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
