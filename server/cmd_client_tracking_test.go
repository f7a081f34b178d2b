package server

import (
	"strings"
	"testing"
)

// Tracking is accepted with Redis's checks (TestCompat_SameRepliesAsRedis
// compares them with a real redis-server) and shows in CLIENT INFO,
// CLIENT TRACKINGINFO (a map in RESP3) and INFO's tracking_clients.
func TestCLIENT_TRACKING(t *testing.T) {
	ts := startServer(t, Options{})
	c, other := ts.dial(t), ts.dial(t)
	otherID := other.do("CLIENT ID\r\n")[1:]
	for _, tc := range []struct{ req, want string }{
		{"HELLO 3\r\n", "{"},
		{"CLIENT TRACKINGINFO\r\n", "{$flags: ~[$off], $redirect: :-1, $prefixes: []}"},
		{"CLIENT TRACKING on OPTIN NOLOOP\r\n", "+OK"},
		{"CLIENT CACHING yes\r\n", "+OK"},
		{"CLIENT TRACKINGINFO\r\n", "{$flags: ~[$on, $optin, $caching-yes, $noloop], $redirect: :0, $prefixes: []}"},
		{"NEXTID\r\n", ":"}, // the next command ends CACHING's effect
		{"CLIENT TRACKINGINFO\r\n", "{$flags: ~[$on, $optin, $noloop], $redirect: :0, $prefixes: []}"},
		{"CLIENT TRACKING off\r\n", "+OK"},
		{"CLIENT TRACKING on REDIRECT " + otherID + " BCAST PREFIX id:\r\n", "+OK"},
		{"CLIENT GETREDIR\r\n", ":" + otherID},
		{"CLIENT TRACKINGINFO\r\n", "{$flags: ~[$on, $bcast], $redirect: :" + otherID + ", $prefixes: [$id:]}"},
		{"CLIENT TRACKING on REDIRECT 0\r\n", "-ERR The client ID you want redirect to does not exist"},
	} {
		// "{" and ":" stand for any map and any integer.
		if got := c.do(tc.req); !strings.HasPrefix(got, tc.want) || len(tc.want) > 1 && got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	info := c.do("CLIENT INFO\r\n")
	if !strings.HasPrefix(info, "=txt:id=") || !strings.Contains(info, " flags=t ") || !strings.Contains(info, " redir="+otherID+" ") ||
		!strings.Contains(info, " resp=3 ") {
		t.Errorf("CLIENT INFO = %q", info)
	}
	if got := c.do("INFO clients\r\n"); !strings.Contains(got, "\r\ntracking_clients:1\r\n") {
		t.Errorf("INFO clients = %q", got)
	}
	// No invalidation is ever pushed: the next reply is PING's own.
	if got := other.do("PING\r\n"); got != "+PONG" {
		t.Errorf("PING on the redirect target = %q", got)
	}
}
