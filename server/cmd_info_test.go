package server

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// infoFields parses INFO's text into section -> key -> value.
func infoFields(t *testing.T, text string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	var sec map[string]string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n") {
		switch {
		case strings.HasPrefix(line, "# "):
			sec = map[string]string{}
			out[line[2:]] = sec
		case line == "":
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok || sec == nil {
				t.Fatalf("INFO line %q", line)
			}
			sec[k] = v
		}
	}
	return out
}

func TestINFO(t *testing.T) {
	ts := startServer(t, Options{Version: "v1.2.3"})
	rdb := ts.client(t, nil)
	ctx := context.Background()
	if err := rdb.Do(ctx, "NEXTIDS", 5).Err(); err != nil {
		t.Fatal(err)
	}
	text, err := rdb.Info(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	info := infoFields(t, text)
	want := map[string]map[string]string{
		"Server":  {"flaked_version": "v1.2.3", "process_id": strconv.Itoa(os.Getpid()), "tcp_port": ts.port},
		"Clients": {"connected_clients": "1", "maxclients": "10000"},
		"Stats":   {"total_connections_received": "1", "ids_issued": "5", "nextid_errors": "0"},
		"Flaked":  {"machine_ids": "1", "mode": "flake", "layout": ts.gen.g.Layout().String(), "ready": "1"},
	}
	for sec, kv := range want {
		for k, v := range kv {
			if got, ok := info[sec][k]; !ok || got != v {
				t.Errorf("INFO %s %s = %q (present %v), want %q", sec, k, got, ok, v)
			}
		}
	}
	// HELLO, CLIENT SETINFO x2, NEXTIDS, INFO: go-redis's handshake counts.
	if n, _ := strconv.Atoi(info["Stats"]["total_commands_processed"]); n < 2 {
		t.Errorf("total_commands_processed = %d", n)
	}
	if _, err := strconv.Atoi(info["Server"]["uptime_in_seconds"]); err != nil {
		t.Errorf("uptime_in_seconds: %v", err)
	}
	if !strings.HasPrefix(text, "# Server\r\n") {
		t.Errorf("INFO does not start with # Server: %.40q", text)
	}
}

var allSections = []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "Keyspace", "Flaked"}

func TestINFO_Sections(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	for req, want := range map[string][]string{
		"INFO stats\r\n":          {"Stats"},
		"INFO FLAKED clients\r\n": {"Clients", "Flaked"},
		"INFO all\r\n":            allSections,
		"INFO default\r\n":        allSections,
		"INFO keyspace\r\n":       {"Keyspace"},
		"INFO nosuch\r\n":         {},
	} {
		got := c.do(req)
		if !strings.HasPrefix(got, "$") {
			t.Fatalf("%q = %q", req, got)
		}
		info := infoFields(t, got[1:])
		if len(info) != len(want) {
			t.Errorf("%q: sections %v, want %v", req, info, want)
		}
		for _, sec := range want {
			if len(info[sec]) == 0 && sec != "Keyspace" { // no keys, no lines
				t.Errorf("%q: no section %s", req, sec)
			}
		}
	}
}

// The fields Redis tools read (redis-cli --stat, exporters) are there, with
// numbers where Redis has numbers; in RESP3 INFO is a verbatim string.
func TestINFO_RedisFields(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	c.do("HELLO 3\r\n")
	text := c.do("INFO\r\n")
	if !strings.HasPrefix(text, "=txt:# Server\r\n") {
		t.Fatalf("INFO in RESP3 = %.40q", text)
	}
	info := infoFields(t, text[len("=txt:"):])
	want := map[string]map[string]string{
		"Server":      {"redis_version": RedisVersion, "redis_mode": "standalone", "arch_bits": "64"},
		"Clients":     {"connected_clients": "1", "blocked_clients": "0", "tracking_clients": "0"},
		"Persistence": {"loading": "0", "rdb_bgsave_in_progress": "0", "aof_rewrite_in_progress": "0"},
		"Replication": {"role": "master", "connected_slaves": "0", "master_repl_offset": "0"},
		"Keyspace":    {},
	}
	for sec, kv := range want {
		if _, ok := info[sec]; !ok {
			t.Errorf("no section %s", sec)
		}
		for k, v := range kv {
			if got := info[sec][k]; got != v {
				t.Errorf("INFO %s %s = %q, want %q", sec, k, got, v)
			}
		}
	}
	for _, f := range []struct{ sec, key string }{
		{"Memory", "used_memory"}, {"Memory", "used_memory_rss"}, {"Memory", "used_memory_peak"},
		{"Stats", "total_commands_processed"}, {"Stats", "instantaneous_ops_per_sec"}, {"Stats", "total_connections_received"},
		{"Server", "server_time_usec"},
	} {
		if n, err := strconv.ParseUint(info[f.sec][f.key], 10, 64); err != nil || f.key == "used_memory" && n == 0 {
			t.Errorf("INFO %s %s = %q, want a number", f.sec, f.key, info[f.sec][f.key])
		}
	}
	if h := info["Memory"]["used_memory_human"]; !regexp.MustCompile(`^\d+\.\d\d[KMG]$`).MatchString(h) {
		t.Errorf("used_memory_human = %q", h)
	}
	if id := info["Server"]["run_id"]; len(id) != 40 || id == info["Replication"]["master_replid"] {
		t.Errorf("run_id %q, master_replid %q", id, info["Replication"]["master_replid"])
	}
}

// instantaneous_ops_per_sec is the rate since the previous sample, taken
// at most every 100 ms.
func TestINFO_OpsPerSec(t *testing.T) {
	ts := startServer(t, Options{})
	st := &ts.info
	n := ts.commandsProcessed()
	st.mu.Lock()
	st.at, st.ops = time.Now().Add(-2*time.Second), n-1000 // 1000 commands in the last 2 s
	st.mu.Unlock()
	if got := ts.opsPerSec(); got < 450 || got > 500 {
		t.Errorf("ops/s = %d, want about 500", got)
	}
	if got := ts.opsPerSec(); got < 450 || got > 500 { // within 100 ms: the same sample
		t.Errorf("ops/s right after = %d, want the same", got)
	}
}

func TestBytesToHuman(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.00K", 1536: "1.50K", 5 << 20: "5.00M", 3 << 30: "3.00G", 1 << 60: "1024.00P"} {
		if got := bytesToHuman(n); got != want {
			t.Errorf("bytesToHuman(%d) = %q, want %q", n, got, want)
		}
	}
}
