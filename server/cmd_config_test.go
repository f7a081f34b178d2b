package server

import (
	"testing"
)

func TestCONFIG(t *testing.T) {
	ts := startServer(t, Options{MaxConns: 77, RequirePass: "pw"})
	c := ts.dial(t)
	c.do("AUTH pw\r\n")
	for _, tc := range []struct{ req, want string }{
		{"CONFIG GET save\r\n", "[$save, $]"},
		{"CONFIG GET appendonly\r\n", "[$appendonly, $no]"},
		{"CONFIG GET MAXCLIENTS\r\n", "[$maxclients, $77]"},
		{"CONFIG GET requirepass\r\n", "[]"},
		{"CONFIG GET nosuch\r\n", "[]"},
		{"CONFIG GET *\r\n", "[$appendonly, $no, $databases, $1, $maxclients, $77, $proto-max-bulk-len, $65536, $save, $, $timeout, $0]"},
		{"CONFIG GET save save\r\n", "[$save, $]"},
		{"CONFIG GET\r\n", "-ERR wrong number of arguments for 'config|get' command"},
		{"CONFIG SET save x\r\n", "-ERR CONFIG SET is not supported: flaked is configured by the flags of 'flaked serve'"},
		{"CONFIG FOO\r\n", "-ERR unknown subcommand 'FOO'. Try CONFIG HELP."},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.req, got, tc.want)
		}
	}
}
