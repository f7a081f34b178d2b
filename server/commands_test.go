package server

import (
	"strings"
	"testing"
)

func TestUnknownCommand(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	long := strings.Repeat("x", 300)
	for _, tc := range []struct{ req, want string }{
		{"GET key\r\n", "-ERR unknown command 'GET', with args beginning with: 'key' "},
		{"FLUSHALL\r\n", "-ERR unknown command 'FLUSHALL', with args beginning with: "},
		{resp("SET", "a", "b"), "-ERR unknown command 'SET', with args beginning with: 'a' 'b' "},
		{resp("BAD\r\nCMD", "x\ny"), "-ERR unknown command 'BAD  CMD', with args beginning with: 'x y' "},
		{resp(long, long), "-ERR unknown command '" + long[:128] + "', with args beginning with: '" + long[:128] + "' "},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%.30q = %q, want %q", tc.req, got, tc.want)
		}
	}
	if got := ts.stats.unknown.Load(); got != 5 {
		t.Errorf("unknown commands = %d", got)
	}
	ts.checkServes(t)
}
