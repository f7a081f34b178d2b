package server

// NEXTID: one ID, as an integer.
func cmdNextID(c *conn, args [][]byte) {
	s := c.s
	one := c.one[:] // a slice of a local would escape through the interface call
	if s.tgen == nil || !s.tgen.TryNextIDs(one) {
		if !c.wait() { // in an event loop: a goroutine asks again
			return
		}
		id, err := s.gen.NextID(s.ctx)
		if err != nil {
			c.generatorError(err)
			return
		}
		one[0] = id
	}
	s.stats.issued(s.isCounter(one[0]), 1)
	c.writeUint(one[0])
}

// isCounter tells counter-mode IDs by their reserved machine ID.
func (s *Server) isCounter(id uint64) bool { return id&s.machMask == s.counterMachine }

// generatorError answers a failed NextID/NextIDs. The generator never
// guesses an ID, so the client gets the reason and may retry.
func (c *conn) generatorError(err error) {
	s := c.s
	s.stats.nextIDErrors.Add(1)
	s.warn.Warn().Err(err).Str("mode", s.gen.Mode().String()).Msg("no ID issued")
	c.writeError("ERR no ID issued: " + err.Error())
}
