package server

import (
	"context"
	"testing"
)

func TestPING(t *testing.T) {
	ts := startServer(t, Options{})
	rdb := ts.client(t, nil)
	ctx := context.Background()
	if got, err := rdb.Ping(ctx).Result(); got != "PONG" || err != nil {
		t.Errorf("Ping = %q, %v", got, err)
	}
	if got, err := rdb.Do(ctx, "PING", "hello world").Text(); got != "hello world" || err != nil {
		t.Errorf("PING msg = %q, %v", got, err)
	}
	c := ts.dial(t)
	for req, want := range map[string]string{
		"PING\r\n":            "+PONG",
		"ping\r\n":            "+PONG",
		"PING hi\r\n":         "$hi",
		`PING "a b"` + "\r\n": "$a b",
		resp("PING", ""):      "$",
		"PING a b\r\n":        "-ERR wrong number of arguments for 'ping' command",
	} {
		if got := c.do(req); got != want {
			t.Errorf("%q = %q, want %q", req, got, want)
		}
	}
}
