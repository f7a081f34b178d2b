package server

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

const (
	noAuth    = "-NOAUTH Authentication required."
	wrongPass = "-WRONGPASS invalid username-password pair or user is disabled."
)

func TestAUTH_Required(t *testing.T) {
	ts := startServer(t, Options{RequirePass: "s3cret"})
	c := ts.dial(t)
	for _, req := range []string{resp("NEXTID"), "NEXTIDS 3\r\n", "PING\r\n", "INFO\r\n", "CLIENT ID\r\n", "PARSE 1\r\n", "HELLO 2\r\n"} {
		got := c.do(req)
		if req == "HELLO 2\r\n" {
			if !strings.HasPrefix(got, "-NOAUTH HELLO must be called with the client already authenticated") {
				t.Errorf("%q before AUTH = %q", req, got)
			}
			continue
		}
		if got != noAuth {
			t.Errorf("%q before AUTH = %q, want %q", req, got, noAuth)
		}
	}
	// Unknown commands and wrong arity are reported first, as in Redis.
	if got := c.do("NOPE\r\n"); !strings.HasPrefix(got, "-ERR unknown command 'NOPE'") {
		t.Errorf("unknown command before AUTH = %q", got)
	}
	for req, want := range map[string]string{
		"AUTH wrong\r\n":           wrongPass,
		"AUTH default wrong\r\n":   wrongPass,
		"AUTH someone s3cret\r\n":  wrongPass,
		"AUTH a b c\r\n":           "-ERR syntax error",
		"AUTH\r\n":                 "-ERR wrong number of arguments for 'auth' command",
		resp("AUTH", "s3cret\r\n"): wrongPass,
	} {
		if got := c.do(req); got != want {
			t.Errorf("%q = %q, want %q", req, got, want)
		}
	}
	if got := c.do(resp("NEXTID")); got != noAuth {
		t.Errorf("NEXTID after failed AUTHs = %q", got)
	}
	if got := c.do("AUTH s3cret\r\n"); got != "+OK" {
		t.Fatalf("AUTH s3cret = %q", got)
	}
	if got := c.do(resp("NEXTID")); !strings.HasPrefix(got, ":") {
		t.Errorf("NEXTID after AUTH = %q", got)
	}
	// A later failed AUTH does not log the connection out.
	if got := c.do("AUTH wrong\r\n"); got != wrongPass {
		t.Errorf("AUTH wrong = %q", got)
	}
	if got := c.do("PING\r\n"); got != "+PONG" {
		t.Errorf("PING = %q", got)
	}
	d := ts.dial(t)
	if got := d.do("AUTH default s3cret\r\n"); got != "+OK" {
		t.Errorf("AUTH default s3cret = %q", got)
	}
	// QUIT needs no password.
	e := ts.dial(t)
	if got := e.do("QUIT\r\n"); got != "+OK" {
		t.Errorf("QUIT = %q", got)
	}
	e.expectEOF()
}

func TestAUTH_GoRedis(t *testing.T) {
	ts := startServer(t, Options{RequirePass: "s3cret"})
	ctx := context.Background()
	// go-redis authenticates with HELLO 3 AUTH (RESP2: AUTH).
	for _, opts := range []*redis.Options{{Password: "s3cret"}, {Username: "default", Password: "s3cret"}, {Password: "s3cret", Protocol: 2}} {
		rdb := ts.client(t, opts)
		if id, err := rdb.Do(ctx, "NEXTID").Int64(); err != nil || id <= 0 {
			t.Errorf("%+v: NEXTID = %d, %v", opts, id, err)
		}
	}
	rdb := ts.client(t, &redis.Options{Password: "wrong", MaxRetries: -1})
	if err := rdb.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: %v", err)
	}
	rdb = ts.client(t, &redis.Options{MaxRetries: -1})
	if err := rdb.Do(ctx, "NEXTID").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("no password: %v", err)
	}
}

func TestAUTH_NoPasswordConfigured(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	if got := c.do("AUTH x\r\n"); !strings.HasPrefix(got, "-ERR AUTH <password> called without any password configured for the default user") {
		t.Errorf("AUTH x = %q", got)
	}
	if got := c.do("AUTH default anything\r\n"); got != "+OK" {
		t.Errorf("AUTH default anything = %q", got)
	}
	if got := c.do("AUTH bob x\r\n"); got != wrongPass {
		t.Errorf("AUTH bob x = %q", got)
	}
}
