package server

// NEXTID: one ID, as an integer.
func cmdNextID(c *conn, args [][]byte) {
	s := c.s
	id, err := s.gen.NextID(s.ctx)
	if err != nil {
		c.generatorError(err)
		return
	}
	s.stats.issued(s.isCounter(id), 1)
	c.writeUint(id)
}

// isCounter tells counter-mode IDs by their reserved machine ID.
func (s *Server) isCounter(id uint64) bool { return id&s.machMask == s.counterMachine }

// generatorError answers a failed NextID/NextIDs. The generator never
// guesses an ID, so the client gets the reason and may retry.
func (c *conn) generatorError(err error) {
	s := c.s
	s.stats.nextIDErrors.Add(1)
	s.warn.Warn().Err(err).Str("mode", s.gen.Mode()).Msg("no ID issued")
	c.writeError("ERR no ID issued: " + err.Error())
}
