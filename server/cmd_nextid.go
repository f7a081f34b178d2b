package server

// NEXTID [STRING]: one ID, as an integer, or with STRING as a bulk string
// of its decimal digits, for clients that would round an integer over
// 2^53 (JavaScript's Numbers). Without the option it allocates nothing.
func cmdNextID(c *conn, args [][]byte) {
	asString := false
	if len(args) > 1 {
		if asString = stringOption(c, "NEXTID", args[1:]); !asString {
			return
		}
	}
	s := c.s
	one := c.one[:] // a slice of a local would escape through the interface call
	if s.tgen == nil || !s.tgen.TryNextIDs(one) {
		if !c.wait() { // in an event loop: a goroutine asks again
			return
		}
		id, err := s.gen.NextID(c.waitCtx())
		if err != nil {
			c.generatorError(err)
			return
		}
		one[0] = id
	}
	s.stats.issued(s.isCounter(one[0]), 1)
	if asString {
		c.writeUintString(one[0])
		return
	}
	c.writeUint(one[0])
}

// stringOption checks the options after an ID command's arguments: only
// STRING, once. Otherwise it answers the error and reports false.
func stringOption(c *conn, cmd string, opts [][]byte) bool {
	if len(opts) == 1 && equalFold(opts[0], "string") {
		return true
	}
	c.writeErrorf("ERR syntax error: the only option of %s is STRING (IDs as bulk strings)", cmd)
	return false
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
