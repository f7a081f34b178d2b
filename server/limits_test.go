package server

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// Each abusive request gets a protocol error and its connection closed;
// the requests before it are answered, and other clients are unaffected.
func TestLimits_AbuseClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, Options{})
	bystander := ts.dial(t)
	bystander.do("PING\r\n")
	for _, tc := range []struct {
		name, req, want string
	}{
		{"huge bulk length", "*1\r\n$999999999999\r\n", "-ERR Protocol error: invalid bulk length 999999999999 (max 65536 bytes)"},
		// redcon's own reader overflows an index and panics on this one.
		{"bulk length near 2^63", "*1\r\n$9223372036854775807\r\nxx", "-ERR Protocol error: invalid bulk length 9223372036854775807 (max 65536 bytes)"},
		{"bulk length over int64", "*1\r\n$99999999999999999999\r\n", "-ERR Protocol error: invalid bulk length 9223372036854775807 (max 65536 bytes)"},
		{"bulk over MaxBulk", "*2\r\n$4\r\nPING\r\n$65537\r\n" + strings.Repeat("x", 1000), "-ERR Protocol error: invalid bulk length 65537 (max 65536 bytes)"},
		{"a million args", "*1000000\r\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length 1000000 (max 1024 arguments)"},
		{"args over MaxArgs", "*1025\r\n", "-ERR Protocol error: invalid multibulk length 1025 (max 1024 arguments)"},
		{"negative bulk length", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length"},
		{"zero args", "*0\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"bad count", "*x\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"count without CR", "*1\n", "-ERR Protocol error: invalid multibulk length"},
		{"simple string for a bulk", "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'"},
		{"bulk without CRLF", "*1\r\n$4\r\nPINGxx", "-ERR Protocol error: invalid bulk length"},
		{"endless count line", "*" + strings.Repeat("1", DefaultMaxLine+1), "-ERR Protocol error: too big mbulk count string"},
		{"endless bulk length line", "*1\r\n$" + strings.Repeat("1", DefaultMaxLine+1), "-ERR Protocol error: too big bulk count string"},
		{"unbalanced quotes (redcon's check)", "PING \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request"},
		{"inline args over MaxArgs", strings.Repeat("a ", 2000) + "\r\n", "-ERR Protocol error: too many arguments in inline request (2000, max 1024)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dial(t)
			c.send("PING\r\n" + resp("NEXTID") + tc.req)
			if got := c.read(); got != "+PONG" {
				t.Fatalf("the request before: %q", got)
			}
			if got := c.read(); !strings.HasPrefix(got, ":") {
				t.Fatalf("the request before: %q", got)
			}
			if got := c.read(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			c.expectEOF()
			if got := bystander.do(resp("NEXTID")); !strings.HasPrefix(got, ":") {
				t.Fatalf("bystander: %q", got)
			}
			ts.checkServes(t)
		})
	}
}

// An inline line that never ends is cut off at MaxLine, without the server
// buffering more than that.
func TestLimits_EndlessInlineLine(t *testing.T) {
	for _, max := range []int{0, 1000} {
		ts := startServer(t, Options{MaxLine: max})
		if max == 0 {
			max = DefaultMaxLine
		}
		c := ts.dial(t)
		go func() { // writes until the server closes; 4 MiB at most
			chunk := strings.Repeat("A", 4096)
			for range 1024 {
				if _, err := io.WriteString(c.nc, chunk); err != nil {
					return
				}
			}
		}()
		want := fmt.Sprintf("-ERR Protocol error: too big inline request (over %d bytes)", max)
		if got := c.read(); got != want {
			t.Fatalf("MaxLine %d: %q, want %q", max, got, want)
		}
		ts.checkServes(t)
	}
}

// A line of exactly MaxLine bytes, a bulk of exactly MaxBulk bytes and
// exactly MaxArgs arguments are served.
func TestLimits_AtTheLimitIsServed(t *testing.T) {
	ts := startServer(t, Options{MaxLine: 100, MaxBulk: 100, MaxArgs: 8})
	c := ts.dial(t)
	msg := strings.Repeat("m", 100-len("PING "))
	if got := c.do("PING " + msg + "\n"); got != "$"+msg {
		t.Errorf("inline line of MaxLine bytes: %.30q", got)
	}
	bulk := strings.Repeat("b", 100)
	if got := c.do(resp("PING", bulk)); got != "$"+bulk {
		t.Errorf("bulk of MaxBulk bytes: %.30q", got)
	}
	if got := c.do(resp("CLIENT", "SETINFO", "LIB-NAME", "x", "a", "b", "c", "d")); got != "-ERR wrong number of arguments for 'client|setinfo' command" {
		t.Errorf("MaxArgs arguments: %q", got)
	}
	if got := c.do(resp("PING", bulk+"x")); got != "-ERR Protocol error: invalid bulk length 101 (max 100 bytes)" {
		t.Errorf("bulk over MaxBulk: %q", got)
	}
}

// A request dripped one byte at a time is served like any other (the
// parser scans each byte once, so this costs no stack or rescans).
func TestLimits_SlowDrip(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	req := resp("PING", strings.Repeat("d", 3000)) + "NEXTIDS 3\r\n"
	for i := range len(req) {
		c.send(req[i : i+1])
		if i%500 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if got := c.read(); got != "$"+strings.Repeat("d", 3000) {
		t.Errorf("dripped PING: %.30q", got)
	}
	if got := c.read(); !strings.HasPrefix(got, "[:") {
		t.Errorf("dripped NEXTIDS: %q", got)
	}
}
