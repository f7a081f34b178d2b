package server

import "fmt"

// protocolError is a request that breaks the protocol or a limit. Its text
// follows Redis ("Protocol error: ..."), as does redcon's own.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

func protocolErrorf(format string, args ...any) error {
	return protocolError(fmt.Sprintf(format, args...))
}

// protocolError answers a request that breaks the protocol or a limit; the
// connection closes once the replies before it and this one are out.
func (c *conn) protocolError(err error) {
	s := c.s
	s.stats.protocolErrors.Add(1)
	s.warn.Warn().Str("addr", c.addr).Uint64("client_id", c.id).Str("error", err.Error()).Msg("protocol error; closing the connection")
	c.out = appendError(c.out, "ERR "+err.Error())
	c.quit = true
}
