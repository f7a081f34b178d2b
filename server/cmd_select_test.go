package server

import "testing"

func TestSELECT(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t)
	for req, want := range map[string]string{
		"SELECT 0\r\n":  "+OK",
		"SELECT 1\r\n":  "-ERR DB index is out of range",
		"SELECT -1\r\n": "-ERR DB index is out of range",
		"SELECT x\r\n":  "-ERR value is not an integer or out of range",
		"SELECT\r\n":    "-ERR wrong number of arguments for 'select' command",
	} {
		if got := c.do(req); got != want {
			t.Errorf("%q = %q, want %q", req, got, want)
		}
	}
}
