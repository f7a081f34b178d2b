package server

import (
	"strings"
	"testing"
)

// RESET leaves MULTI (issuing nothing), goes back to RESP2, drops the
// name, the tracking and the authentication, and keeps the library info.
func TestRESET(t *testing.T) {
	ts := startServer(t, Options{RequirePass: "pw"})
	c := ts.dial(t)
	for _, tc := range []struct{ req, want string }{
		{"RESET\r\n", "+RESET"}, // before AUTH too
		{"HELLO 3 AUTH default pw SETNAME app\r\n", "{$server: $flaked, "},
		{"CLIENT SETINFO LIB-NAME lib\r\n", "+OK"},
		{"CLIENT TRACKING on\r\n", "+OK"},
		{"MULTI\r\n", "+OK"},
		{"NEXTID\r\n", "+QUEUED"},
		{"RESET\r\n", "+RESET"},
		{"EXEC\r\n", "-NOAUTH Authentication required."},
		{"AUTH pw\r\n", "+OK"},
		{"EXEC\r\n", "-ERR EXEC without MULTI"},
		{"CLIENT GETNAME\r\n", "(nil)"}, // RESP2's null
		{"CLIENT GETREDIR\r\n", ":-1"},
		{"CLIENT INFO\r\n", "$id="},
		{"RESET x\r\n", "-ERR wrong number of arguments for 'reset' command"},
	} {
		if got := c.do(tc.req); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q = %q, want it to begin %q", tc.req, got, tc.want)
		}
	}
	info := c.do("CLIENT INFO\r\n")
	if !strings.Contains(info, " name= ") || !strings.Contains(info, " resp=2 ") || !strings.Contains(info, " lib-name=lib ") ||
		!strings.Contains(info, " flags=N ") || !strings.Contains(info, " redir=-1 ") {
		t.Errorf("CLIENT INFO after RESET: %q", info)
	}
	if n := ts.issued(); n != 0 {
		t.Errorf("%d IDs issued, want 0", n)
	}
}

// Without a password RESET leaves the connection authenticated.
func TestRESET_NoPassword(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	if got := c.do("HELLO 3\r\nRESET\r\n"); !strings.HasPrefix(got, "{") {
		t.Fatalf("HELLO 3 = %q", got)
	}
	if got := c.read(); got != "+RESET" {
		t.Fatalf("RESET = %q", got)
	}
	if got := c.do("NEXTID\r\n"); !strings.HasPrefix(got, ":") {
		t.Errorf("NEXTID after RESET = %q", got)
	}
}
