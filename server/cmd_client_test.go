package server

import (
	"regexp"
	"strings"
	"testing"
)

func TestCLIENT(t *testing.T) {
	ts := startServer(t, Options{})
	c, other := ts.dial(t), ts.dial(t)
	other.do("CLIENT SETNAME other\r\n")
	id := c.do("CLIENT ID\r\n")
	if !regexp.MustCompile(`^:\d+$`).MatchString(id) {
		t.Fatalf("CLIENT ID = %q", id)
	}
	for _, tc := range []struct{ req, want string }{
		{"CLIENT GETNAME\r\n", "(nil)"},
		{"CLIENT SETNAME app\r\n", "+OK"},
		{"CLIENT GETNAME\r\n", "$app"},
		{resp("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters."},
		{"CLIENT SETINFO LIB-NAME go-redis(,go1.26)\r\n", "+OK"},
		{"CLIENT SETINFO lib-ver 9.22.0\r\n", "+OK"},
		{"CLIENT SETINFO COLOR red\r\n", "-ERR Unrecognized option 'COLOR'"},
		{"CLIENT SETNAME\r\n", "-ERR wrong number of arguments for 'client|setname' command"},
		{"CLIENT NO-EVICT on\r\n", "+OK"},
		{"CLIENT NO-TOUCH maybe\r\n", "-ERR syntax error"},
		{"CLIENT KILL ID 1\r\n", "-ERR unknown subcommand 'KILL'. Try CLIENT HELP."},
		{"CLIENT\r\n", "-ERR wrong number of arguments for 'client' command"},
		{"CLIENT LIST TYPE pubsub\r\n", "$"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	info := c.do("CLIENT INFO\r\n")
	// Redis 7.2's fields in its order.
	want := regexp.MustCompile(`^\$id=` + id[1:] + ` addr=127\.0\.0\.1:\d+ laddr=` + regexp.QuoteMeta(ts.addr) +
		` fd=\d+ name=app age=\d+ idle=\d+ flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0` +
		` rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=client\|info user=default redir=-1 resp=2` +
		` lib-name=go-redis\(,go1\.26\) lib-ver=9\.22\.0\n$`)
	if !want.MatchString(info) {
		t.Errorf("CLIENT INFO = %q", info)
	}
	list := c.do("CLIENT LIST\r\n")
	if lines := strings.Split(strings.TrimSuffix(list, "\n"), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], "name=app") && !strings.Contains(lines[1], "name=app") ||
		!strings.Contains(list, "name=other") {
		t.Errorf("CLIENT LIST = %q", list)
	}
	otherID := other.do("CLIENT ID\r\n")[1:]
	if got := c.do("CLIENT LIST ID " + otherID + " 999999\r\n"); !strings.HasPrefix(got, "$id="+otherID+" ") ||
		strings.Count(got, "\n") != 1 || !strings.Contains(got, " name=other ") {
		t.Errorf("CLIENT LIST ID %s = %q", otherID, got)
	}
	if got := c.do("CLIENT HELP\r\n"); !strings.HasPrefix(got, "[$CLIENT <subcommand>") {
		t.Errorf("CLIENT HELP = %.60q", got)
	}
}
