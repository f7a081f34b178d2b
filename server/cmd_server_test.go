package server

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestROLE_DBSIZE(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	for _, tc := range []struct{ req, want string }{
		{"ROLE\r\n", "[$master, :0, []]"},
		{"DBSIZE\r\n", ":0"},
		{"ROLE x\r\n", "-ERR wrong number of arguments for 'role' command"},
		{"DBSIZE x\r\n", "-ERR wrong number of arguments for 'dbsize' command"},
		{"TIME x\r\n", "-ERR wrong number of arguments for 'time' command"},
		{"HELLO 3\r\n", "{"},
		{"ROLE\r\n", "[$master, :0, []]"},
		{"DBSIZE\r\n", ":0"},
	} {
		if got := c.do(tc.req); got != tc.want && !(tc.want == "{" && strings.HasPrefix(got, "{")) {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
}

// TIME is the server's clock, [seconds, microseconds] as bulk strings.
func TestTIME(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	before := time.Now().Truncate(time.Microsecond)
	got := c.do("TIME\r\n")
	after := time.Now()
	parts := strings.Split(strings.Trim(got, "[]"), ", ")
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "$") || !strings.HasPrefix(parts[1], "$") {
		t.Fatalf("TIME = %q", got)
	}
	sec, err1 := strconv.ParseInt(parts[0][1:], 10, 64)
	usec, err2 := strconv.ParseInt(parts[1][1:], 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec > 999999 {
		t.Fatalf("TIME = %q", got)
	}
	at := time.Unix(sec, usec*1000)
	if at.Before(before) || at.After(after) {
		t.Errorf("TIME = %v, not within [%v, %v]", at, before, after)
	}
}
