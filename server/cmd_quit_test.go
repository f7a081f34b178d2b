package server

import (
	"testing"
)

func TestQUIT(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	// Requests pipelined after QUIT are not run.
	c.send("PING\r\nQUIT\r\nNEXTID\r\n")
	if a, b := c.read(), c.read(); a != "+PONG" || b != "+OK" {
		t.Fatalf("PING, QUIT = %q, %q", a, b)
	}
	c.expectEOF()
	if got := ts.stats.idsFlake.Load(); got != 0 {
		t.Errorf("%d IDs issued after QUIT", got)
	}
}
