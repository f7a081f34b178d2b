package server

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestHELLO(t *testing.T) {
	ts := startServer(t, Options{RequirePass: "pw", Version: "v9.9.9"})
	c := ts.dial(t)
	noauth := "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	for _, tc := range []struct{ req, want string }{
		{"HELLO 3\r\n", noauth},
		{"HELLO 1\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO 4 AUTH default pw\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO two\r\n", "-ERR Protocol version is not an integer or out of range"},
		{"HELLO 2 BOGUS\r\n", "-ERR Syntax error in HELLO option 'BOGUS'"},
		{"HELLO 2 AUTH default\r\n", "-ERR Syntax error in HELLO option 'AUTH'"},
		{"HELLO 3 AUTH default bad\r\n", wrongPass},
		{"HELLO 2 AUTH bob pw\r\n", wrongPass},
		{"HELLO 2 AUTH default pw SETNAME bad\tname\r\n", "-ERR Client names cannot contain spaces, newlines or special characters."},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	// None of the failures switched the protocol: this is RESP2.
	got := c.do("HELLO 2 AUTH default pw SETNAME app-1\r\n")
	id := c.do("CLIENT ID\r\n")
	want := "[$server, $flaked, $version, $" + RedisVersion + ", $proto, :2, $id, " + id + ", $mode, $standalone, $role, $master, $modules, []]"
	if got != want {
		t.Errorf("HELLO 2 AUTH SETNAME = %q, want %q", got, want)
	}
	if got := c.do("CLIENT GETNAME\r\n"); got != "$app-1" {
		t.Errorf("name after HELLO SETNAME = %q", got)
	}
	// Without a version the protocol stays; HELLO 3 switches, HELLO 2 back.
	for _, tc := range []struct{ req, want string }{
		{"HELLO\r\n", "[$server, $flaked, $version, $" + RedisVersion + ", $proto, :2, "},
		{"HELLO 3\r\n", "{$server: $flaked, $version: $" + RedisVersion + ", $proto: :3, $id: " + id + ", $mode: $standalone, $role: $master, $modules: []}"},
		{"HELLO\r\n", "{$server: $flaked, $version: $" + RedisVersion + ", $proto: :3, "},
		{"CLIENT GETNAME\r\n", "$app-1"},
		{"CLIENT SETNAME\r\n", "-ERR wrong number of arguments for 'client|setname' command"},
		{"NEXTID\r\n", ":"},
		{"HELLO 2\r\n", "[$server, $flaked, $version, $" + RedisVersion + ", $proto, :2, "},
		{"CLIENT INFO\r\n", "$id="},
	} {
		if got := c.do(tc.req); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q = %q, want it to begin %q", tc.req, got, tc.want)
		}
	}
}

// go-redis asks for RESP3 by default and gets it; Protocol 2 stays in
// RESP2.
func TestHELLO_GoRedis(t *testing.T) {
	ts := startServer(t, Options{})
	for _, tc := range []struct{ proto, want int }{{0, 3}, {2, 2}, {3, 3}} {
		rdb := ts.client(t, &redis.Options{Protocol: tc.proto, ClientName: "svc"})
		ctx := context.Background()
		if id, err := rdb.Do(ctx, "NEXTID").Int64(); err != nil || id <= 0 {
			t.Fatalf("protocol %d: NEXTID = %d, %v", tc.proto, id, err)
		}
		if name, err := rdb.ClientGetName(ctx).Result(); err != nil || name != "svc" {
			t.Errorf("protocol %d: name %q, %v", tc.proto, name, err)
		}
		info, err := rdb.ClientInfo(ctx).Result()
		if err != nil || info.LibName == "" || info.Resp != tc.want || info.Multi != -1 {
			t.Errorf("protocol %d: CLIENT INFO = %+v, %v", tc.proto, info, err)
		}
		cfg, err := rdb.ConfigGet(ctx, "maxclients").Result()
		if err != nil || cfg["maxclients"] != "10000" || len(cfg) != 1 {
			t.Errorf("protocol %d: CONFIG GET maxclients = %v, %v", tc.proto, cfg, err)
		}
		if info, err := rdb.Info(ctx, "replication").Result(); err != nil || !strings.Contains(info, "role:master\r\n") {
			t.Errorf("protocol %d: INFO replication = %q, %v", tc.proto, info, err)
		}
	}
}
