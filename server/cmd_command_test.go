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
		{"COMMAND INFO nextid nosuch\r\n", "[[$nextid, :-1, [+fast], :0, :0, :0, [+@fast], [], [], []], (nil)]"},
		{"COMMAND INFO NEXTIDS\r\n", "[[$nextids, :-2, [], :0, :0, :0, [+@slow], [], [], []]]"},
		{"COMMAND INFO multi exec watch\r\n", "[[$multi, :1, [+noscript, +loading, +stale, +fast, +allow_busy], :0, :0, :0, [+@fast, +@transaction], [], [], []], " +
			"[$exec, :1, [+noscript, +loading, +stale, +skip_slowlog], :0, :0, :0, [+@slow, +@transaction], [], [], []], " +
			"[$watch, :-2, [+noscript, +loading, +stale, +fast, +allow_busy], :0, :0, :0, [+@fast, +@transaction], [], [], []]]"},
		{"COMMAND INFO reset\r\n", "[[$reset, :1, [+noscript, +loading, +stale, +fast, +no_auth, +allow_busy], :0, :0, :0, [+@fast, +@connection], [], [], []]]"},
		// RESP3: flags and the empty lists are sets, docs a map, null _,
		// as Redis 7.0 sends them.
		{"HELLO 3\r\n", "{$server: $flaked, $version: $" + RedisVersion + ", $proto: :3, $id: :1, $mode: $standalone, $role: $master, $modules: []}"},
		{"COMMAND INFO echo nosuch\r\n", "[[$echo, :2, ~[+loading, +stale, +fast], :0, :0, :0, ~[+@fast, +@connection], ~[], ~[], ~[]], _]"},
		{"COMMAND DOCS\r\n", "{}"},
		{"COMMAND GETKEYS x\r\n", "-ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP."},
		{"COMMAND COUNT 1\r\n", "-ERR wrong number of arguments for 'command|count' command"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
	all := c.do("COMMAND\r\n")
	for _, name := range []string{"ping", "echo", "nextid", "nextids", "parse", "info", "auth", "hello", "reset", "client", "select", "command",
		"config", "quit", "multi", "exec", "discard", "watch", "unwatch", "role", "time", "dbsize"} {
		if !strings.Contains(all, "[$"+name+", ") {
			t.Errorf("COMMAND lacks %s: %.80q", name, all)
		}
	}
	if got := c.do("COMMAND LIST\r\n"); !strings.HasPrefix(got, "[$auth, $client, $command, $config, $dbsize, $discard, $echo, $exec") {
		t.Errorf("COMMAND LIST = %q", got)
	}
}
