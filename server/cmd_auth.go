package server

import "crypto/subtle"

// AUTH [user] password, as Redis with one user, "default", whose password
// is RequirePass (none: any password).
func cmdAuth(c *conn, args [][]byte) {
	var user, pass []byte
	switch len(args) {
	case 2:
		if c.s.opts.RequirePass == "" {
			c.writeError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
		user, pass = []byte("default"), args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		c.writeError("ERR syntax error")
		return
	}
	if c.auth(user, pass) {
		c.writeOK()
	}
}

// auth authenticates the connection, or answers WRONGPASS. A failed
// attempt leaves an authenticated connection authenticated, as in Redis.
func (c *conn) auth(user, pass []byte) bool {
	s := c.s
	ok := string(user) == "default" &&
		(s.opts.RequirePass == "" || subtle.ConstantTimeCompare(pass, []byte(s.opts.RequirePass)) == 1)
	if !ok {
		s.warn.Warn().Str("addr", c.addr).Uint64("client_id", c.id).Msg("authentication failed")
		c.writeError("WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	c.authed = true
	return true
}
