package server

import "testing"

func TestECHO(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	for _, tc := range []struct{ req, want string }{
		{resp("ECHO", "a b\r\nc"), "$a b\r\nc"},
		{resp("ECHO", ""), "$"},
		{"ECHO\r\n", "-ERR wrong number of arguments for 'echo' command"},
		{"ECHO a b\r\n", "-ERR wrong number of arguments for 'echo' command"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	// redis-cli --pipe's last request: 20 random bytes, any of them.
	magic := string([]byte{0, 1, '\r', '\n', 0xff, '$', '*', 0x80, 'x', ' ', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	if got := c.do(resp("ECHO", magic)); got != "$"+magic {
		t.Errorf("ECHO of binary bytes = %q", got)
	}
	if got := c.do("PING\r\n"); got != "+PONG" {
		t.Errorf("PING after = %q", got)
	}
}
