package server

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
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
