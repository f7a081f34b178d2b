package server

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/redistest"
)

// The same requests, to flaked and to a real redis-server, get the same
// replies, byte for byte (rendered by readReply): the errors, the RESP3
// types, the transaction semantics. What differs by nature (server name
// and version in HELLO, client IDs, addresses) is left out of the
// scripts; HELLO's reply is compared by its type only.
func TestCompat_SameRepliesAsRedis(t *testing.T) {
	scripts := map[string][]string{
		"transactions": {
			"MULTI", "MULTI", "PING", "FOO", "PING a b c", "EXEC", "EXEC", "DISCARD",
			"MULTI", "PING", "ECHO x", "EXEC",
			"MULTI", "PING", "DISCARD", "EXEC",
			"MULTI", "WATCH a", "UNWATCH", "EXEC", "WATCH", "WATCH a b", "UNWATCH", "UNWATCH x",
			"MULTI", "ECHO", "EXEC", "MULTI", "EXEC",
			"MULTI", "PING", "QUIT",
		},
		"transaction in RESP3": {
			"HELLO 3", "MULTI", "PING", "CONFIG GET maxclients", "CLIENT GETNAME", "EXEC",
			"MULTI", "PING x y z", "EXEC", "CLIENT GETNAME",
		},
		"reset": {
			"HELLO 3", "CLIENT SETNAME app", "CLIENT TRACKING on", "MULTI", "PING", "RESET", "EXEC",
			"CLIENT GETNAME", "CLIENT GETREDIR", "CONFIG GET maxclients", "RESET x",
		},
		"hello": {
			"HELLO 4", "HELLO 1", "HELLO x", "HELLO 3 SETNAME", "HELLO 3 BOGUS", "HELLO 3 AUTH default",
			"HELLO 2 SETNAME a\\x01b", "HELLO", "HELLO 3", "HELLO", "HELLO 2", "CLIENT GETNAME",
		},
		"connection commands": {
			"ECHO", "ECHO a b", "ECHO hi", "PING", "PING x", "TIME x", "DBSIZE", "DBSIZE x", "ROLE", "ROLE x",
			"HELLO 3", "ECHO hi", "ROLE", "DBSIZE", "INFO keyspace", "CLIENT GETNAME",
			"COMMAND INFO nosuch", "COMMAND INFO echo", "COMMAND DOCS nosuch", "COMMAND INFO nosuch2",
			"HELLO 2", "INFO keyspace", "COMMAND INFO echo nosuch",
			"CLIENT LIST ID 999999", "CLIENT LIST ID x", "CLIENT LIST ID", "CLIENT LIST TYPE pubsub", "CLIENT LIST TYPE x",
			"CLIENT LIST FOO", "HELLO 3", "CLIENT LIST ID 999999", "CLIENT LIST TYPE master",
		},
		"tracking": {
			"CLIENT TRACKING", "CLIENT TRACKING maybe", "CLIENT TRACKINGINFO", "CLIENT GETREDIR",
			"CLIENT CACHING yes", "CLIENT TRACKING on", "CLIENT CACHING yes", "CLIENT GETREDIR",
			"CLIENT TRACKING on OPTIN", "CLIENT TRACKING on OPTOUT", "CLIENT TRACKING off",
			"CLIENT TRACKING on OPTIN OPTOUT", "CLIENT TRACKING on BCAST OPTIN", "CLIENT TRACKING on PREFIX a",
			"CLIENT TRACKING on OPTIN", "CLIENT CACHING yes", "CLIENT CACHING no", "CLIENT CACHING maybe",
			"CLIENT TRACKINGINFO", "PING", "CLIENT TRACKINGINFO", "CLIENT CACHING yes", "MULTI", "PING", "EXEC",
			"CLIENT TRACKINGINFO", "CLIENT TRACKING on BCAST", "CLIENT TRACKING off",
			"CLIENT TRACKING on BCAST PREFIX a PREFIX b NOLOOP", "CLIENT TRACKINGINFO",
			"CLIENT TRACKING on REDIRECT 999999", "CLIENT TRACKING on REDIRECT x", "CLIENT TRACKING on FOO",
			"HELLO 3", "CLIENT TRACKINGINFO", "CLIENT TRACKING off", "CLIENT TRACKINGINFO", "CLIENT GETREDIR",
		},
	}
	real := redistest.Start(t, redistest.Options{})
	ts := startServer(t, Options{})
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			want := replies(t, real.Addr(), script)
			got := replies(t, ts.addr, script)
			for i, req := range script {
				if got[i] != want[i] {
					t.Errorf("%q: flaked %q, redis %q", req, got[i], want[i])
				}
			}
		})
	}
}

// The same with a password: what runs before AUTH, and RESET's. (HELLO's
// NOAUTH text differs: flaked has Redis 7.2's "HELLO <proto> AUTH", the
// redis-server here may be older.)
func TestCompat_SameRepliesAsRedis_Auth(t *testing.T) {
	script := []string{
		"MULTI", "ECHO x", "CLIENT SETNAME x", "RESET", "AUTH pw", "MULTI", "ECHO x", "RESET", "ECHO x",
		"AUTH pw", "HELLO 3", "RESET", "ECHO x", "HELLO 3 AUTH default bad", "HELLO 3 AUTH default pw",
		"ECHO x", "RESET", "HELLO 2 AUTH default pw", "MULTI", "RESET", "AUTH pw", "MULTI", "ECHO x",
		"EXEC",
	}
	real := redistest.Start(t, redistest.Options{Password: "pw"})
	ts := startServer(t, Options{RequirePass: "pw"})
	want := replies(t, real.Addr(), script)
	got := replies(t, ts.addr, script)
	for i, req := range script {
		if got[i] != want[i] {
			t.Errorf("%q: flaked %q, redis %q", req, got[i], want[i])
		}
	}
}

// replies sends each inline request on one connection and returns the
// rendered replies; HELLO's successful replies are cut to their type.
func replies(t *testing.T, addr string, script []string) []string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	out := make([]string, len(script))
	for i, req := range script {
		out[i] = c.do(strings.ReplaceAll(req, "\\x01", "\x01") + "\r\n")
		if strings.HasPrefix(req, "HELLO") && (strings.HasPrefix(out[i], "{") || strings.HasPrefix(out[i], "[")) {
			out[i] = out[i][:1] + "HELLO's reply"
		}
		if strings.HasPrefix(req, "QUIT") || strings.HasPrefix(req, "RESET") && strings.Contains(req, "QUIT") {
			break
		}
	}
	return out
}

// CLIENT INFO has every field a real redis-server's has, in its order
// (flaked may have more: Redis 7.2's lib-name and lib-ver); INFO has every
// field redis-cli --stat reads.
func TestCompat_ClientInfoFields(t *testing.T) {
	real := redistest.Start(t, redistest.Options{})
	ts := startServer(t, Options{})
	// The values that must agree too: those of a fresh connection.
	same := []string{"name", "flags", "db", "sub", "psub", "ssub", "multi", "cmd", "user", "redir", "resp"}
	vals := map[string]map[string]string{}
	keys := func(addr string) []string {
		line := replies(t, addr, []string{"CLIENT INFO"})[0]
		var out []string
		vals[addr] = map[string]string{}
		for _, f := range strings.Fields(strings.TrimPrefix(line, "$")) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("CLIENT INFO field %q in %q", f, line)
			}
			out = append(out, k)
			vals[addr][k] = v
		}
		return out
	}
	want, got := keys(real.Addr()), keys(ts.addr)
	for _, k := range same {
		if vals[real.Addr()][k] != vals[ts.addr][k] {
			t.Errorf("CLIENT INFO %s: flaked %q, redis %q", k, vals[ts.addr][k], vals[real.Addr()][k])
		}
	}
	i := 0
	for _, k := range got {
		if i < len(want) && k == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("CLIENT INFO fields\nflaked: %v\nredis:  %v\n(first missing or out of order: %s)", got, want, want[i])
	}
}
