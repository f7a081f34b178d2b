package server

import (
	"strings"
	"testing"
)

func TestCOMMAND(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	n := len(ts.cmds)
	for _, tc := range []struct{ req, want string }{
		{"COMMAND COUNT\r\n", ":" + itoa(n)},
		{"COMMAND DOCS\r\n", "[]"},
		{"COMMAND DOCS NEXTID\r\n", "[]"},
		{"COMMAND INFO nextid nosuch\r\n", "[[$nextid, :1, [+fast], :0, :0, :0, [], [], [], []], (nil)]"},
		{"COMMAND INFO NEXTIDS\r\n", "[[$nextids, :2, [], :0, :0, :0, [], [], [], []]]"},
		{"COMMAND GETKEYS x\r\n", "-ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP."},
		{"COMMAND COUNT 1\r\n", "-ERR wrong number of arguments for 'command|count' command"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	all := c.do("COMMAND\r\n")
	for _, name := range []string{"ping", "nextid", "nextids", "parse", "info", "auth", "hello", "client", "select", "command", "config", "quit"} {
		if !strings.Contains(all, "[$"+name+", ") {
			t.Errorf("COMMAND lacks %s: %.80q", name, all)
		}
	}
	if got := c.do("COMMAND LIST\r\n"); !strings.HasPrefix(got, "[$auth, $client, $command") {
		t.Errorf("COMMAND LIST = %q", got)
	}
}
