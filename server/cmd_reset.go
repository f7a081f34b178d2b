package server

// RESET: the connection as it was when it connected, as Redis does: out
// of MULTI, back to RESP2, not authenticated when a password is set, no
// name, no tracking. The library name and version stay (Redis keeps them
// too). Replies +RESET, also inside MULTI (it is not queued).
func cmdReset(c *conn, _ [][]byte) {
	if c.tx != nil {
		c.endTx()
	}
	c.setProto(2)
	c.authed = c.s.opts.RequirePass == ""
	c.mu.Lock()
	c.name = ""
	c.trk = tracking{}
	c.mu.Unlock()
	c.writeStatus("RESET")
}
