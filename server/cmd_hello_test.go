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
	for req, want := range map[string]string{
		"HELLO 3\r\n":                  "-NOPROTO sorry, this protocol version is not supported.",
		"HELLO 3 AUTH default pw\r\n":  "-NOPROTO sorry, this protocol version is not supported.",
		"HELLO 1\r\n":                  "-NOPROTO sorry, this protocol version is not supported.",
		"HELLO two\r\n":                "-ERR Protocol version is not an integer or out of range",
		"HELLO 2 BOGUS\r\n":            "-ERR Syntax error in HELLO option 'BOGUS'",
		"HELLO 2 AUTH default\r\n":     "-ERR Syntax error in HELLO option 'AUTH'",
		"HELLO 2 AUTH default bad\r\n": wrongPass,
		"HELLO 2 AUTH bob pw\r\n":      wrongPass,
	} {
		if got := c.do(req); got != want {
			t.Errorf("%q = %q, want %q", req, got, want)
		}
	}
	if got := c.do("HELLO 2 AUTH default pw SETNAME bad\tname\r\n"); got != "-ERR Client names cannot contain spaces, newlines or special characters." {
		t.Errorf("HELLO with a bad name = %q", got)
	}
	got := c.do("HELLO 2 AUTH default pw SETNAME app-1\r\n")
	id := c.do("CLIENT ID\r\n")
	want := "[$server, $flaked, $version, $v9.9.9, $proto, :2, $id, " + id + ", $mode, $standalone, $role, $master, $modules, []]"
	if got != want {
		t.Errorf("HELLO 2 AUTH SETNAME = %q, want %q", got, want)
	}
	if got := c.do("CLIENT GETNAME\r\n"); got != "$app-1" {
		t.Errorf("name after HELLO SETNAME = %q", got)
	}
	if got := c.do("HELLO\r\n"); !strings.HasPrefix(got, "[$server, $flaked") {
		t.Errorf("HELLO = %q", got)
	}
}

// go-redis asks for RESP3 by default, is refused, and goes on in RESP2.
func TestHELLO_GoRedisFallsBackToRESP2(t *testing.T) {
	ts := startServer(t, Options{})
	for _, proto := range []int{0, 2, 3} {
		rdb := ts.client(t, &redis.Options{Protocol: proto, ClientName: "svc"})
		ctx := context.Background()
		if id, err := rdb.Do(ctx, "NEXTID").Int64(); err != nil || id <= 0 {
			t.Fatalf("protocol %d: NEXTID = %d, %v", proto, id, err)
		}
		if name, err := rdb.ClientGetName(ctx).Result(); err != nil || name != "svc" {
			t.Errorf("protocol %d: name %q, %v", proto, name, err)
		}
		info, err := rdb.ClientInfo(ctx).Result()
		if err != nil || info.LibName == "" || info.Resp != 2 {
			t.Errorf("protocol %d: CLIENT INFO = %+v, %v", proto, info, err)
		}
	}
}
